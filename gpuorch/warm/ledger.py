"""A warm instance's idle time as money (spec ``keep_warm``; docs/money.md, "Warm capacity").

An idle period (``store.models.WarmInstance``) is billed like an attempt of the job that left the
instance warm: from ``idle_since`` at the instance's price and billing granularity, with no
minimum bill of its own (the launch paid it), until the period ends (a job leased the instance, or
it was released). The caps count it through ``idle_attempt``: a transient ``Attempt`` row of that
job (negative number, never stored) that is live, and stoppable, while the period is open. So its
idle cost is spent money and its next horizon a reservation in every cap check, the job's, its
sweep's and the day's, and the caps' running check (``gate_for``'s stop) says when to release it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from sqlmodel import Session, col, or_, select

from gpuorch.money.cost import attempt_cost
from gpuorch.store.models import Attempt, Job, WarmInstance
from gpuorch.store.states import AttemptStatus


def idle_attempt(w: WarmInstance) -> Attempt:
    """The idle period as the ledger bills it: an attempt of ``w.job_id``, live while open."""
    ended = w.ended_at
    return Attempt(job_id=w.job_id, number=-(w.id or 0), provider=w.provider, region=w.region, zone=w.zone,
                   instance_type=w.instance_type, spot=w.spot, price_per_hour=w.price_per_hour,
                   billing_granularity_s=w.billing_granularity_s, min_billing_s=0,
                   status=AttemptStatus.ENDED if ended is not None else AttemptStatus.LAUNCHED,
                   requested_at=w.idle_since, launched_at=w.idle_since, ended_at=ended, instance_id=w.instance_id)


def idle_cost(w: WarmInstance, now: datetime) -> float:
    """USD the idle period has cost by ``now`` (all of it once ended)."""
    return attempt_cost(idle_attempt(w), now)


def report_rows(s: Session, since: datetime | None) -> Iterator[tuple[Attempt, Job]]:
    """(idle attempt, the job that left it warm) of every idle period open at or after ``since``
    (all with None): ``gpuorch cost``'s rows of idle time (``money.report``; a negative number,
    like a volume's: no attempt of the job's count)."""
    q = select(WarmInstance, Job).join(Job, col(Job.id) == col(WarmInstance.job_id))
    if since is not None:
        q = q.where(or_(col(WarmInstance.ended_at).is_(None), col(WarmInstance.ended_at) >= since))
    for w, job in s.exec(q):
        yield idle_attempt(w), job


def ledger_rows(s: Session, since: datetime, sweeps: Iterable[int | None]) -> Iterator[tuple[Attempt, int | None]]:
    """(idle attempt, sweep id) of every idle period the money ledger counts (``Ledger.build``'s
    rows): the open ones, those that ended since ``since`` (the UTC day's start) and those of the
    active ``sweeps``."""
    ids = [i for i in sweeps if i is not None]
    clause = or_(col(WarmInstance.ended_at).is_(None), col(WarmInstance.ended_at) >= since)
    if ids:
        clause = or_(clause, col(WarmInstance.sweep_id).in_(ids))
    for w in s.exec(select(WarmInstance).where(clause)):
        yield idle_attempt(w), w.sweep_id
