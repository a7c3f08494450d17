"""What an agent refused to restore (checkpoints or records of another installation or job; see
``gpuorch.checkpoint.namespace``), turned into the job's events and its status line, once.

The agent reports its refusals together with its restore's outcome (``AgentStatus.refused``);
the attempt's ``restore_refused`` column marks them recorded, so later polls write nothing.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from gpuorch.agent.protocol import AgentStatus
from gpuorch.jobs import events
from gpuorch.store.models import Attempt, Job

EVENT = "checkpoint_refused"
MAX_LINE = 1000  # an agent's line, as stored (it names keys and ids; never longer in practice)


def pending(row: Attempt, st: AgentStatus) -> bool:
    """Whether the agent reported refusals not yet recorded for this attempt."""
    return bool(st.refused) and row.restore_refused is None


def record(s: Session, job: Job, r: Attempt, st: AgentStatus, now: datetime) -> None:
    """One ``checkpoint_refused`` event per refusal, and the job's message says so (``status``)."""
    lines = [" ".join(str(why).split())[:MAX_LINE] for why in st.refused if str(why).strip()]
    r.restore_refused = "\n".join(lines)
    for why in lines:
        events.record(s, now, EVENT, why, job_id=job.id, attempt=r.number)
    how = f"resumed from {st.restored_from}" if st.restored_from else "started fresh"
    job.message = (f"{how}; refused {len(lines)} stored checkpoint(s) or record(s) that are not this job's "
                   f"(gpuorch events {job.id})")
