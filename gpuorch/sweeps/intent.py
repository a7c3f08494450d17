"""What the sweep commands write: a sweep and its trials (ordinary jobs), a cancel request, new
limits (``update``), or a restart (``resume``).
No cloud call happens here; the daemon schedules the trials (gpuorch.money.caps's gate)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.errors import UnknownSweep, UserInputError
from gpuorch.jobs import events
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import EPS
from gpuorch.money.cost import attempt_cost
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Job, JobStatus, Sweep, SweepStatus
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


def spent_on(s: Session, sweep_id: int, now: datetime) -> float:
    """USD the sweep's trials have been charged so far."""
    ids = [j.id for j in trials_of(s, sweep_id)]
    return sum(attempt_cost(a, now) for a in s.exec(select(Attempt).where(col(Attempt.job_id).in_(ids))))


def _limits(s: Session, sweep: Sweep, budget: float | None, deadline: datetime | None, now: datetime) -> list[str]:
    """Check a new budget and deadline (UserInputError naming the option and the fix, nothing
    changed), then apply them to the sweep and its unfinished trials. What changed, for people."""
    if budget is not None:
        if budget <= 0:
            raise UserInputError(f"--budget: ${budget:.2f} is not a budget; give a positive amount in USD")
        spent = spent_on(s, sweep.id or 0, now)
        if budget < spent - EPS:
            raise UserInputError(f"--budget: ${budget:.2f} is below the ${spent:.4f} already spent; "
                                 f"give at least ${spent:.4f}")
    if deadline is not None and deadline <= now:
        raise UserInputError(f"--deadline: {deadline:%Y-%m-%d %H:%M} UTC is in the past; give a later time "
                             "or a duration like 8h")
    changed = []
    if budget is not None:
        changed.append(f"budget ${sweep.max_cost or 0:.2f} -> ${budget:.2f}" if sweep.max_cost is not None
                       else f"budget ${budget:.2f}")
        sweep.max_cost = budget
    if deadline is not None:
        old, sweep.deadline = sweep.deadline, deadline
        changed.append(f"deadline {deadline:%Y-%m-%d %H:%M} UTC")
        for job in trials_of(s, sweep.id or 0):  # trials planned for the old deadline plan for the new one
            spec = JobSpec.model_validate_json(job.spec)
            if not job.status.terminal and spec.deadline is not None and old is not None \
                    and spec.deadline.at == old.isoformat():
                job.spec = spec.model_copy(update={"deadline": spec.deadline.model_copy(
                    update={"at": deadline.isoformat()})}).model_dump_json()
    return changed


def update(store: Store, ref: str, now: datetime, budget: float | None = None,
           deadline: datetime | None = None) -> Sweep:
    """Raise (or lower, not below the spend) the sweep's cap and move its deadline; held and
    queued trials go on under the new limits. UserInputError for bad values: nothing changes."""
    if budget is None and deadline is None:
        raise UserInputError("update: nothing to change; give --budget USD and/or --deadline TIME")
    with store.write() as s:
        sweep = find_sweep(s, ref)
        changed = _limits(s, sweep, budget, deadline, now)
        events.record(s, now, "sweep_updated", f"sweep {sweep.name}: {', '.join(changed)}")
        return sweep


RESUMABLE = (JobStatus.CANCELLED, JobStatus.BUDGET_EXHAUSTED, JobStatus.HELD, JobStatus.QUEUED)


def resume(store: Store, ref: str, now: datetime, budget: float | None = None,
           deadline: datetime | None = None) -> tuple[Sweep, int]:
    """Restart a done or cancelled sweep: its unfinished trials (cancelled, budget_exhausted) go
    back in the queue, ``held`` where an attempt left a checkpoint (they resume from it, first),
    ``queued`` otherwise; succeeded, failed and pruned trials stay. Returns (sweep, trials resumed)."""
    with store.write() as s:
        sweep = find_sweep(s, ref)
        if sweep.status == SweepStatus.ACTIVE:
            raise UserInputError(f"resume: sweep {sweep.name} is still active; raise its limits with "
                                 f"`gpuorch sweep update {sweep.name} --budget USD --deadline TIME`")
        other = s.exec(select(Sweep).where(Sweep.name == sweep.name, Sweep.status == SweepStatus.ACTIVE)).first()
        if other is not None:
            raise UserInputError(f"resume: a newer sweep {sweep.name} (id {other.id}) is active; cancel it first")
        changed = _limits(s, sweep, budget, deadline, now)
        if sweep.deadline is not None and sweep.deadline <= now:
            raise UserInputError(f"--deadline: the sweep's deadline {sweep.deadline:%Y-%m-%d %H:%M} UTC has passed; "
                                 "give a new one, like --deadline 8h")
        hit = 0
        for job in trials_of(s, sweep.id or 0):
            if job.status not in RESUMABLE:
                continue
            saved = s.exec(select(Attempt).where(Attempt.job_id == job.id, col(Attempt.last_checkpoint).is_not(None))
                           ).first() is not None
            job.status = JobStatus.HELD if saved else JobStatus.QUEUED
            job.cancel_requested, job.finished_at, job.not_before = False, None, None
            job.message = "resumed with its sweep" + (" from its checkpoint" if saved else "")
            hit += 1
        if hit == 0:
            raise UserInputError(f"resume: sweep {sweep.name} has no unfinished trial to resume")
        sweep.status, sweep.cancel_requested, sweep.finished_at = SweepStatus.ACTIVE, False, None
        sweep.message = None
        events.record(s, now, "sweep_resumed", f"sweep {sweep.name}: {hit} trials resumed"
                      + (f"; {', '.join(changed)}" if changed else ""))
        return sweep, hit
