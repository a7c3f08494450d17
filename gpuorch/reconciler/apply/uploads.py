"""The checkpoint uploads each live attempt was seen to take: the money ledger sizes an attempt's
stop grace by them (``gpuorch.money.caps.Policy.for_attempt``)."""

from __future__ import annotations

from sqlalchemy import and_
from sqlmodel import Session, col, select

from gpuorch.clock import aware
from gpuorch.store.models import Attempt, AttemptStatus, Checkpoint


def upload_times(s: Session) -> dict[tuple[int, int], float]:
    """(job id, attempt number) -> the longest ``recorded_at - completed_at`` among the live
    attempt's checkpoints: from the job finishing the checkpoint to the daemon seeing it durable
    (the upload, and up to a pass of the daemon's look). Checkpoints without ``completed_at``
    (older agents) say nothing; an attempt none of whose uploads was seen is left out."""
    rows = s.exec(select(Checkpoint.job_id, Checkpoint.attempt, Checkpoint.completed_at, Checkpoint.recorded_at).join(
        Attempt, and_(col(Attempt.job_id) == col(Checkpoint.job_id), col(Attempt.number) == col(Checkpoint.attempt)))
        .where(col(Attempt.status) != AttemptStatus.ENDED, col(Checkpoint.completed_at).is_not(None),
               col(Checkpoint.recorded_at).is_not(None))).all()
    out: dict[tuple[int, int], float] = {}
    for job_id, number, completed, recorded in rows:
        done, seen = aware(completed), aware(recorded)
        if done is None or seen is None:
            continue
        took = max(0.0, (seen - done).total_seconds())
        out[(job_id, number)] = max(out.get((job_id, number), 0.0), took)
    return out
