"""Hard cost caps (job, sweep, UTC day): the ledger of what each scope spent and reserved, and the
gate that tells one job whether it may launch and whether its running attempt must stop. Pure.

Terms (the proof is in docs/money.md):

- decision interval ``I``: the longest the daemon goes without looking at a running attempt.
- stop grace ``S``: how long a clean stop may take (final checkpoint) before the instance is
  terminated.
- decision point: the latest moment by which the daemon can have an instance terminated,
  counting from a look now: the next look (<= I), a clean stop (S), the look that terminates
  (<= I). The horizon ``H = 2I + S``.
- worst case of a launch: its price billed for H, i.e. ``price x max(minimum, H rounded up to
  the billing increment)``.
- reservation of a live attempt: what it may still add until its decision point (for an
  attempt being stopped: until its drain deadline plus I).
- committed = spent + reservations. A launch needs ``committed + worst case <= cap`` in every
  scope of the job. Jobs are decided in id order; a running attempt is stopped cleanly when its
  scope would be over its cap even if every newer job's attempt were stopped now (so the newest
  trials give way first and the oldest, furthest along, keep running).

Launches are admitted against a ledger re-read inside the launch's own write transaction, so two
launches (in one pass or in two daemons) cannot both take the last dollars.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gpuorch.money.cost import attempt_cost, charged, cost_between, projected_cost
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

if TYPE_CHECKING:
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.placement import Candidate
    from gpuorch.store.models import Attempt, Job

EPS = 1e-9  # USD: float noise, not money
IN_FLIGHT = (JobStatus.STARTING, JobStatus.RUNNING, JobStatus.RECOVERING)


@dataclass(frozen=True)
class Policy:
    daily_cap: float | None = None  # USD per UTC day, all jobs together (DaemonConfig.daily_budget)
    decision_interval_s: float = 30.0
    stop_grace_s: float = 120.0

    @property
    def horizon_s(self) -> float:
        return 2 * self.decision_interval_s + self.stop_grace_s


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(now: datetime) -> datetime:
    return day_start(now) + timedelta(days=1)


def worst_case(c: Candidate, policy: Policy) -> float:
    """USD a launch on ``c`` may cost before its decision point."""
    return charged(c.price_per_hour, c.offer.billing_granularity_s, c.offer.min_billing_s, policy.horizon_s)


def stoppable(a: Attempt) -> bool:
    """A running attempt the gate may stop now (a requested one has no instance to stop yet)."""
    return a.status in (AttemptStatus.LAUNCHED, AttemptStatus.RUNNING)


def reservation(a: Attempt, now: datetime, policy: Policy, *, stop_now: bool = False) -> float:
    """USD a live attempt may still add before it can be stopped (0 once ended); with
    ``stop_now``, if a clean stop of a stoppable attempt were requested now."""
    if a.status == AttemptStatus.ENDED:
        return 0.0
    if a.status == AttemptStatus.DRAINING:
        until = max(now, a.drain_until or now) + timedelta(seconds=policy.decision_interval_s)
    elif stop_now and stoppable(a):
        until = now + timedelta(seconds=policy.stop_grace_s + policy.decision_interval_s)
    else:
        until = now + timedelta(seconds=policy.horizon_s)
    return max(0.0, projected_cost(a, until, now) - attempt_cost(a, now))


@dataclass
class Totals:
    spent: float = 0.0
    fixed: float = 0.0  # reservations a stop cannot shrink: draining or not yet launched
    running: dict[int, tuple[float, float]] = field(default_factory=dict)  # job id -> (runs on, stopped now)

    @property
    def reserved(self) -> float:
        return self.fixed + sum(on for on, _ in self.running.values())

    @property
    def committed(self) -> float:
        return self.spent + self.reserved

    def committed_if_newer_stop(self, job_id: int) -> float:
        """Committed if every running attempt of a job newer than ``job_id`` were stopped now."""
        return self.spent + self.fixed + sum(on if j <= job_id else off for j, (on, off) in self.running.items())


@dataclass(frozen=True)
class SweepState:
    """What the gate needs of an active sweep."""

    id: int
    name: str
    max_cost: float | None
    deadline: datetime | None
    max_parallel: int
    in_flight: int  # trials starting, running or recovering


@dataclass
class Ledger:
    """Spend and reservations per job, sweep and the current UTC day.

    Built from the attempts of every unfinished job, of every active sweep's trials, and every
    attempt that was live or ended today (``rows``: (attempt, its job's sweep id)).
    """

    now: datetime
    jobs: dict[int, Totals] = field(default_factory=dict)
    sweeps: dict[int, Totals] = field(default_factory=dict)
    day: Totals = field(default_factory=Totals)

    @classmethod
    def build(cls, rows: Iterable[tuple[Attempt, int | None]], now: datetime, policy: Policy) -> Ledger:
        ledger, start = cls(now), day_start(now)
        for a, sweep_id in rows:
            spent, on = attempt_cost(a, now), reservation(a, now, policy)
            off = reservation(a, now, policy, stop_now=True)
            scopes = [ledger.jobs.setdefault(a.job_id, Totals())]
            if sweep_id is not None:
                scopes.append(ledger.sweeps.setdefault(sweep_id, Totals()))
            for t in scopes + [ledger.day]:
                t.spent += spent if t is not ledger.day else cost_between(a, start, now, now)
                if stoppable(a):  # one per job, unless a crash left two: count both
                    was_on, was_off = t.running.get(a.job_id, (0.0, 0.0))
                    t.running[a.job_id] = (was_on + on, was_off + off)
                else:
                    t.fixed += on
        return ledger


@dataclass(frozen=True)
class Cap:
    scope: str  # for people: "job budget", "sweep lr budget", "daily budget"
    limit: float
    spent: float
    committed: float  # spent + every live attempt's reservation
    committed_if_newer_stop: float  # ... if the running attempts of newer jobs were stopped now
    daily: bool = False

    @classmethod
    def of(cls, scope: str, limit: float, t: Totals, job_id: int, daily: bool = False) -> Cap:
        return cls(scope, limit, t.spent, t.committed, t.committed_if_newer_stop(job_id), daily)


@dataclass(frozen=True)
class Stop:
    """End the running attempt cleanly (final checkpoint first), then set the job's status."""

    reason: TerminationReason
    job_status: JobStatus
    message: str
    not_before: datetime | None = None  # daily cap: the job may run again from then


@dataclass(frozen=True)
class Hold:
    """Do not launch now: set the job's status; look again at ``not_before`` (None: next poll)."""

    status: JobStatus
    message: str
    not_before: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.status.terminal


@dataclass(frozen=True)
class Gate:
    """One job's money and sweep constraints at ``now``. ``caps`` include the job's own reservations."""

    now: datetime
    policy: Policy
    caps: tuple[Cap, ...] = ()
    stop: Stop | None = None
    hold: Hold | None = None

    def affords(self, c: Candidate) -> bool:
        need = worst_case(c, self.policy)
        return all(cap.committed + need <= cap.limit + EPS for cap in self.caps)

    def unaffordable(self, ranked: list[Candidate]) -> Hold:
        """Why none of ``ranked`` may launch: a cap spent for good, or reservations to wait out."""
        need = min(worst_case(c, self.policy) for c in ranked)
        for cap in self.caps:
            if cap.spent + need > cap.limit + EPS:
                left = max(0.0, cap.limit - cap.spent)
                why = f"{cap.scope} ${cap.limit:.2f} has ${left:.4f} left; the cheapest launch may cost ${need:.4f}"
                if cap.daily:
                    tomorrow = next_day(self.now)
                    return Hold(JobStatus.QUEUED, f"{why}; waiting for {tomorrow:%Y-%m-%d} UTC", not_before=tomorrow)
                return Hold(JobStatus.BUDGET_EXHAUSTED, f"budget exhausted: {why}")
        return Hold(JobStatus.QUEUED, "waiting: running attempts hold the rest of the budget")


def gate_for(job: Job, spec: JobSpec, sweep: SweepState | None, ledger: Ledger, policy: Policy) -> Gate:
    """The constraints on ``job`` now: its caps, whether to stop its attempt, whether to hold it."""
    now, caps, jid = ledger.now, [], job.id or 0
    if spec.budget is not None:
        caps.append(Cap.of("job budget", spec.budget.max_cost, ledger.jobs.get(jid, Totals()), jid))
    if sweep is not None and sweep.max_cost is not None:
        caps.append(Cap.of(f"sweep {sweep.name} budget", sweep.max_cost, ledger.sweeps.get(sweep.id, Totals()), jid))
    if policy.daily_cap is not None:
        caps.append(Cap.of("daily budget", policy.daily_cap, ledger.day, jid, daily=True))
    stop = hold = None
    over = next((c for c in caps if c.committed_if_newer_stop > c.limit + EPS), None)
    if over is not None:
        msg = f"stopped before the {over.scope} (${over.limit:.2f}) is crossed; ${over.spent:.4f} spent"
        if over.daily:
            tomorrow = next_day(now)
            stop = Stop(TerminationReason.BUDGET_EXHAUSTED, JobStatus.QUEUED, f"{msg}; resumes {tomorrow:%Y-%m-%d} UTC",
                        not_before=tomorrow)
        else:
            stop = Stop(TerminationReason.BUDGET_EXHAUSTED, JobStatus.BUDGET_EXHAUSTED, msg)
    if sweep is not None and sweep.deadline is not None and now >= sweep.deadline:
        when = f"{sweep.deadline:%Y-%m-%d %H:%M} UTC"
        stop = stop or Stop(TerminationReason.CANCELLED, JobStatus.CANCELLED,
                            f"stopped cleanly at the sweep deadline {when}")
        hold = Hold(JobStatus.CANCELLED, f"not started by the sweep deadline {when}")
    elif sweep is not None and job.status not in IN_FLIGHT and sweep.in_flight >= sweep.max_parallel:
        hold = Hold(JobStatus.QUEUED, f"waiting for a slot: sweep {sweep.name} runs {sweep.max_parallel} at a time")
    return Gate(now, policy, tuple(caps), stop, hold)
