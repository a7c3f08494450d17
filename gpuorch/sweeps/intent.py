"""What the sweep commands write: a sweep and its trials (ordinary jobs), or a cancel request.
No cloud call happens here; the daemon schedules the trials (gpuorch.money.caps's gate)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.errors import UnknownSweep, UserInputError
from gpuorch.jobs import events
from gpuorch.jobs.spec import JobSpec
from gpuorch.store import Store
from gpuorch.store.models import Job, JobStatus, Sweep, SweepStatus
from gpuorch.store.refs import row_id
from gpuorch.sweeps.spec import SweepSpec


def submit(store: Store, spec: SweepSpec, trials: list[tuple[dict[str, Any], JobSpec]], now: datetime) -> Sweep:
    """One transaction: the sweep row and a queued job per trial. Refuses a name still active."""
    with store.write() as s:
        if s.exec(select(Sweep).where(Sweep.name == spec.name, Sweep.status == SweepStatus.ACTIVE)).first():
            raise UserInputError(f"name: sweep {spec.name!r} is still active; cancel it or choose another name")
        sweep = Sweep(name=spec.name, spec=spec.model_dump_json(),
                      max_cost=spec.budget.max_cost if spec.budget else None, deadline=spec.deadline,
                      max_parallel=spec.max_parallel, created_at=now,
                      objective_metric=spec.objective.metric if spec.objective else None,
                      objective_mode=spec.objective.mode if spec.objective else "min")
        s.add(sweep)
        s.flush()
        for params, job_spec in trials:
            s.add(Job(name=job_spec.name, spec=job_spec.model_dump_json(), status=JobStatus.QUEUED, created_at=now,
                      updated_at=now, sweep_id=sweep.id, params=json.dumps(params)))
        cap = f", cap ${sweep.max_cost:.2f}" if sweep.max_cost is not None else ""
        events.record(s, now, "sweep_submitted", f"sweep {sweep.name}: {len(trials)} trials, "
                      f"{spec.max_parallel} at a time{cap}")
    return sweep


def find_sweep(s: Session, ref: str) -> Sweep:
    """A sweep by id, or the newest sweep with that name."""
    n = row_id(ref)
    sweep = s.get(Sweep, n) if n is not None else s.exec(
        select(Sweep).where(Sweep.name == ref).order_by(col(Sweep.id).desc())).first()
    if sweep is None:
        raise UnknownSweep.ref(ref)
    return sweep


def trials_of(s: Session, sweep_id: int) -> list[Job]:
    return list(s.exec(select(Job).where(Job.sweep_id == sweep_id).order_by(col(Job.id))))


def cancel(store: Store, ref: str, now: datetime) -> tuple[Sweep, int]:
    """Cancel the sweep: every unfinished trial gets a cancel request. Returns (sweep, trials hit)."""
    with store.write() as s:
        sweep = find_sweep(s, ref)
        hit = 0
        if sweep.status == SweepStatus.ACTIVE:
            sweep.status, sweep.cancel_requested, sweep.finished_at = SweepStatus.CANCELLED, True, now
            sweep.message = "cancelled by user"
            for job in trials_of(s, sweep.id or 0):
                if not job.status.terminal and not job.cancel_requested:
                    job.cancel_requested = True
                    hit += 1
                    events.record(s, now, "cancel_requested", f"sweep {sweep.name} cancelled", job_id=job.id)
            events.record(s, now, "sweep_cancelled", f"sweep {sweep.name} cancelled; {hit} trials to stop")
        return sweep, hit
