"""Hard cost caps (job, sweep, UTC day): the ledger of what each scope spent and reserved, and the
gate that tells one job whether it may launch and whether its running attempt must stop. Pure.

Terms (the proof is in docs/money.md):

- decision interval ``I``: the longest the daemon goes without looking at a running attempt.
- stop grace ``S``: how long a clean stop may take (final checkpoint) before the instance is
  terminated: what *this attempt* needs (``Policy.for_attempt``): twice its longest checkpoint
  upload seen (``recorded_at - completed_at``: the upload and the pass that saw it), >= ``I``,
  <= the configured ``stop_grace_s`` (the bound until an upload is seen, and for admission). A
  spot notice's deadline is the cloud's and ends billing itself, but only then: drained to it, a
  notice just after a look would bill ``I + notice`` on, past ``H`` when ``S`` is short. So the
  daemon drains a capped job's notice for ``S`` at most (``decide/gates.notice_drain``: the final
  checkpoint on notice needs what a stop's does) and ``H`` covers any notice. A slower upload
  later raises ``S``: like a price move, the cap holds, newer trials give way.
- decision point: the latest moment by which the daemon can have an instance terminated,
  counting from a look now: the next look (<= I), a clean stop (S), the look that terminates
  (<= I). The horizon ``H = 2I + S``.
- runway ``R`` of a launch: how long it may run before the running check can stop it: the least
  its guarantees need, the longer of its minimum bill less H (what is paid anyway is used) and,
  with a checkpoint interval, its first checkpoint upload (the interval plus I to see it); 0
  without either (``runway_s``). Recorded on the attempt as ``runway_until``.
- reservation of a live attempt: what it may still add until its decision point, never less
  than until ``runway_until + H`` (being stopped: until its drain deadline plus I).
- committed(at) = spent + every live attempt's reservation as of a look at ``at``.

**One rule** (``within``) decides both admission and the running check, so the two cannot
disagree a pass later: a scope is within its cap at ``at`` if ``committed(at) + extra <= cap``.

- admission of a launch on candidate c: ``within(at = now + R, extra = c billed for R + H)``,
  every other attempt kept running. An attempt admitted so is not stopped within its runway
  while the spend follows the projections: every term of the running checks in between is at
  most what admission counted (``tests/money/test_runway.py`` proves it by property).
- the running check: ``within(at = now)`` with every newer job's running attempt stopped now.
  Jobs are decided in id order, so the newest trials give way first and the oldest, furthest
  along, keep running. Failing it with the money really gone (even with every other attempt
  stopped now, this one's next horizon does not fit) stops the job as ``budget_exhausted``;
  failing it only because other attempts' reservations fill the cap *holds* the trial: a clean
  stop, status ``held``, resumed from its checkpoint before fresh trials start. While another
  attempt of the scope is live (its reservation may come back) nothing ends for good.
  ``budget_exhausted`` is the money really gone: no live attempt in the scope, and less left
  than the cheapest launch's reservation (the numbers go in the job's message).

Launches are admitted against a ledger re-read inside the launch's own write transaction, so two
launches (in one pass or in two daemons) cannot both take the last dollars.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
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
UPLOAD_FACTOR = 2.0  # a final checkpoint may upload slower than the ones seen (bigger, a busier link)


@dataclass(frozen=True)
class Policy:
    daily_cap: float | None = None  # USD per UTC day, all jobs together (DaemonConfig.daily_budget)
    decision_interval_s: float = 30.0
    stop_grace_s: float = 120.0  # the bound on a stop's final checkpoint (before an upload is seen)

    @property
    def horizon_s(self) -> float:
        return 2 * self.decision_interval_s + self.stop_grace_s

    def for_attempt(self, upload_s: float | None) -> Policy:
        """With this attempt's stop grace (module docstring); ``self`` while no upload was seen."""
        if upload_s is None:
            return self
        need = max(UPLOAD_FACTOR * upload_s, self.decision_interval_s)
        return replace(self, stop_grace_s=min(need, self.stop_grace_s))


def day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(now: datetime) -> datetime:
    return day_start(now) + timedelta(days=1)


def runway_s(min_billing_s: float, checkpoint_s: float | None, policy: Policy) -> float:
    """Seconds an admitted attempt may run before the running check may stop it: its runway
    (module docstring; a stop's final checkpoint and a spot notice are in the horizon, not here).
    ``tests/money/test_runway.py``: an admitted attempt is never stopped for budget inside it."""
    i = policy.decision_interval_s
    return max(checkpoint_s + i if checkpoint_s else 0.0, float(min_billing_s) - policy.horizon_s, 0.0)


def worst_case(c: Candidate, policy: Policy, checkpoint_s: float | None = None) -> float:
    """USD a launch on ``c`` may cost before its decision point at its runway's end (every node)."""
    o = c.offer
    reach = runway_s(o.min_billing_s, checkpoint_s, policy) + policy.horizon_s
    return charged(c.total_price_per_hour, o.billing_granularity_s, o.min_billing_s, reach)


def idle(a: Attempt) -> bool:  # a warm instance's idle period (warm.ledger.idle_attempt): its release uploads nothing
    return a.number < 0 and a.instance_id is not None


def stoppable(a: Attempt) -> bool:
    """A running attempt the gate may stop now (a requested one has no instance to stop yet)."""
    return a.status in (AttemptStatus.LAUNCHED, AttemptStatus.RUNNING)


def reserved_until(a: Attempt, now: datetime, at: datetime, policy: Policy, *, stop_now: bool = False) -> datetime:
    """Until when a live attempt's cost is reserved, as of a look at ``at`` (>= now): its decision
    point (not before its runway's end), or with ``stop_now`` and stoppable, a clean stop's. One
    being stopped ends by the first look after its drain deadline (A1: within I of it)."""
    if a.status == AttemptStatus.DRAINING:
        return max(now, (a.drain_until or now) + timedelta(seconds=policy.decision_interval_s))
    if stop_now and stoppable(a):  # an idle one goes in the warm sweep after the pass's launches: no checkpoint
        return now if idle(a) else at + timedelta(seconds=policy.stop_grace_s + policy.decision_interval_s)
    return max(at, a.runway_until or at) + timedelta(seconds=policy.horizon_s)


def reservation(a: Attempt, now: datetime, policy: Policy, *, stop_now: bool = False,
                at: datetime | None = None) -> float:
    """USD a live attempt may still add (0 once ended) before it can be stopped, as of a look at
    ``at`` (default now); with ``stop_now``, if a clean stop of a stoppable one were asked then."""
    if a.status == AttemptStatus.ENDED:
        return 0.0
    until = reserved_until(a, now, at or now, policy, stop_now=stop_now)
    return max(0.0, projected_cost(a, until, now) - attempt_cost(a, now))


@dataclass
class Totals:
    spent: float = 0.0
    fixed: float = 0.0  # reservations a stop cannot shrink now: draining or not yet launched
    running: dict[int, tuple[float, float]] = field(default_factory=dict)  # job id -> (runs on, stopped now)
    live: list[tuple[Attempt, Policy]] = field(default_factory=list)  # every live attempt, its own stop grace

    @property
    def reserved(self) -> float:
        return self.fixed + sum(on for on, _ in self.running.values())

    def committed_if_others_stop(self, job_id: int) -> float:
        """Committed if every running attempt but ``job_id``'s were stopped now (the money itself)."""
        return self.spent + self.fixed + sum(on if j == job_id else off for j, (on, off) in self.running.items())

    def promised(self, now: datetime) -> datetime:
        """The latest runway end promised to a live attempt (now if none)."""
        return max([now, *(a.runway_until for a, _ in self.live if a.runway_until is not None)])

    def committed_for(self, job_id: int, at: datetime, now: datetime) -> float:
        """The one rule's sum: spend, and every live attempt reserved as of a look at ``at``,
        except that a running attempt of a newer job already past its runway counts as stopped
        now (it is the one to give way; one within its runway was promised its run). Another job's idle
        warm instance gives way to any attempt, reserving nothing (the warm sweep reads the caps after the
        pass's launches), none to it (the check of a job with only idle ones live counts all others running on)."""
        mine = [idle(a) for a, _ in self.live if a.job_id == job_id]
        idle_only, total = bool(mine) and all(mine), self.spent
        for a, policy in self.live:
            newer_past = stoppable(a) and a.job_id > job_id and (a.runway_until is None or a.runway_until <= now)
            gives = (idle(a) and a.job_id != job_id and not idle_only) or (newer_past and (idle(a) or not idle_only))
            total += reservation(a, now, policy, stop_now=gives, at=at)
        return total


@dataclass(frozen=True)
class SweepState:
    """What the gate needs of an active sweep."""

    id: int
    name: str
    max_cost: float | None
    deadline: datetime | None
    max_parallel: int
    in_flight: int  # trials starting, running or recovering
    held: int = 0  # trials held that may resume now (they resume before fresh trials start)
    resuming: frozenset[int] = frozenset()  # queued trials with progress (a preemption's): they go with held ones


@dataclass
class Ledger:
    """Spend and reservations per job, sweep and the current UTC day, from the attempts of every
    unfinished job, of every active sweep's trials, and every one live or ended today."""

    now: datetime
    jobs: dict[int, Totals] = field(default_factory=dict)
    sweeps: dict[int, Totals] = field(default_factory=dict)
    day: Totals = field(default_factory=Totals)
    graces: dict[int, float] = field(default_factory=dict)  # job id -> its running attempt's stop grace

    @classmethod
    def build(cls, rows: Iterable[tuple[Attempt, int | None]], now: datetime, base: Policy,
              uploads: Mapping[tuple[int, int], float] | None = None) -> Ledger:
        """``rows``: (attempt, its job's sweep id); ``uploads``: (job id, attempt number) -> its
        longest checkpoint upload seen (s)."""
        ledger, start = cls(now), day_start(now)
        for a, sweep_id in rows:
            policy = base.for_attempt(0.0 if idle(a) else uploads.get((a.job_id, a.number)) if uploads else None)
            if stoppable(a):
                ledger.graces[a.job_id] = policy.stop_grace_s
            spent, on = attempt_cost(a, now), reservation(a, now, policy)
            off = reservation(a, now, policy, stop_now=True)
            scopes = [ledger.jobs.setdefault(a.job_id, Totals())]
            if sweep_id is not None:
                scopes.append(ledger.sweeps.setdefault(sweep_id, Totals()))
            for t in scopes + [ledger.day]:
                t.spent += spent if t is not ledger.day else cost_between(a, start, now, now)
                if a.status != AttemptStatus.ENDED:
                    t.live.append((a, policy))
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
    totals: Totals
    job_id: int
    daily: bool = False

    @property
    def spent(self) -> float:
        return self.totals.spent

    def within(self, policy: Policy, now: datetime, *, at: datetime | None = None,
               extra: Callable[[datetime], float] | None = None) -> bool:
        """The one rule, for admission and the running check alike (module docstring): the
        scope's commitments as of a look at the latest promised runway end (``at``, a launch's
        own runway end, included), plus ``extra(that time)`` (a launch's cost until it)."""
        until = max(at or now, self.totals.promised(now))
        committed = self.totals.committed_for(self.job_id, until, now)
        return committed + (extra(until) if extra else 0.0) <= self.limit + EPS

    @property
    def others_live(self) -> bool:
        """Whether another job's attempt in the scope is live: its reservation may still come back
        (it finishes, its launch fails, its stop ends sooner than reserved)."""
        return any(a.job_id != self.job_id for a, _ in self.totals.live)

    @property
    def money_gone(self) -> bool:
        """Over the cap even if every other running attempt were stopped now, and (job and sweep
        caps) no other attempt of the scope is live (the daily cap: the job waits for tomorrow)."""
        over = self.totals.committed_if_others_stop(self.job_id) > self.limit + EPS
        return over and (self.daily or not self.others_live)


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
    checkpoint_s: float | None = None  # the job's checkpoint interval (its runway)
    waiting: JobStatus = JobStatus.QUEUED  # the status while reservations are waited out (held stays held)

    def runway_until(self, c: Candidate) -> datetime:
        return self.now + timedelta(seconds=runway_s(c.offer.min_billing_s, self.checkpoint_s, self.policy))

    def need(self, c: Candidate) -> float:
        return worst_case(c, self.policy, self.checkpoint_s)

    def affords(self, c: Candidate) -> bool:
        """Admission: every scope within its cap at the end of the launch's runway (or a later
        runway promised to another attempt), the launch billed until then plus the horizon."""
        o, h = c.offer, self.policy.horizon_s

        def launch(until: datetime) -> float:
            seconds = (until - self.now).total_seconds() + h
            return charged(c.total_price_per_hour, o.billing_granularity_s, o.min_billing_s, seconds)

        return all(cap.within(self.policy, self.now, at=self.runway_until(c), extra=launch) for cap in self.caps)

    def reserve_note(self, c: Candidate) -> str:
        """What a launch on ``c`` reserves, in words: its runway and the horizon at its price."""
        o, p = c.offer, self.policy
        where = f"{o.zone} {o.instance_type} {'spot' if c.spot else 'on-demand'}"
        return (f"${self.need(c):.4f} = {runway_s(o.min_billing_s, self.checkpoint_s, p):.0f} s runway + "
                f"{p.horizon_s:.0f} s horizon at ${c.total_price_per_hour:.4f}/h on {where}")

    def unaffordable(self, ranked: list[Candidate]) -> Hold:
        """Why none of ``ranked`` may launch: a cap spent for good (no attempt of its scope live,
        and less left than the cheapest launch reserves), or reservations to wait out."""
        need = self.need(cheapest := min(ranked, key=self.need))
        for cap in self.caps:
            if cap.spent + need <= cap.limit + EPS:
                continue
            left = max(0.0, cap.limit - cap.spent)
            why = (f"{cap.scope} ${cap.limit:.2f} has ${left:.4f} left of it (${cap.spent:.4f} spent); the cheapest "
                   f"launch reserves {self.reserve_note(cheapest)}")
            if cap.daily:
                tomorrow = next_day(self.now)
                return Hold(JobStatus.QUEUED, f"{why}; waiting for {tomorrow:%Y-%m-%d} UTC", not_before=tomorrow)
            if cap.others_live:  # what they do not spend comes back when they end
                return Hold(self.waiting, f"waiting: {why}; running attempts may return part of their reservation")
            return Hold(JobStatus.BUDGET_EXHAUSTED, f"budget exhausted: {why}, and no attempt of it is running")
        tight = next((c for c in self.caps if not c.within(self.policy, self.now, at=self.runway_until(cheapest),
                                                              extra=lambda _: need)), None)
        held = f" ({tight.scope} ${tight.limit:.2f}: ${tight.spent:.4f} spent)" if tight is not None else ""
        return Hold(self.waiting, f"waiting: running attempts hold the rest of the budget{held}; the cheapest "
                                  f"launch reserves {self.reserve_note(cheapest)}")


def _budget_stop(caps: list[Cap], now: datetime, policy: Policy) -> Stop | None:
    """The running check: stop (or hold) the job's attempt if a scope is over its cap."""
    over = [c for c in caps if not c.within(policy, now)]
    if not over:
        return None
    gone = next((c for c in over if c.money_gone), None)  # a job's own budget: always (it holds nothing else)
    cap = gone or over[0]
    own = cap.totals.running.get(cap.job_id, (0.0, 0.0))[0]
    msg = (f"stopped before the {cap.scope} (${cap.limit:.2f}) is crossed; ${cap.spent:.4f} spent, "
           f"${max(0.0, cap.limit - cap.spent):.4f} left, this attempt's next {policy.horizon_s:.0f} s reserve "
           f"${own:.4f}")
    if gone is not None and gone.daily:
        tomorrow = next_day(now)
        return Stop(TerminationReason.BUDGET_EXHAUSTED, JobStatus.QUEUED, f"{msg}; resumes {tomorrow:%Y-%m-%d} UTC",
                    not_before=tomorrow)
    if gone is not None:
        return Stop(TerminationReason.BUDGET_EXHAUSTED, JobStatus.BUDGET_EXHAUSTED,
                    f"{msg}, and no attempt of it is running but this one")
    return Stop(TerminationReason.HELD, JobStatus.HELD,
                f"held: other attempts' reservations fill the {cap.scope} (${cap.limit:.2f}; ${cap.spent:.4f} "
                f"spent, ${cap.totals.reserved:.4f} reserved); resumes from its checkpoint when they free it")


def gate_for(job: Job, spec: JobSpec, sweep: SweepState | None, ledger: Ledger, policy: Policy,
             prune: str | None = None, wait: str | None = None, runs_on: bool = False) -> Gate:
    """The constraints on ``job`` now: its caps, whether to stop its attempt, whether to hold it.
    ``prune``: why the sweep's pruning rule stops the trial now; ``wait``: why the trial is held
    for trials ahead of it to finish (gpuorch.sweeps.finish); None: neither. ``runs_on``: its
    attempt finishes on what its stop would take (gpuorch.money.finishing): no budget stop."""
    now, caps, jid = ledger.now, [], job.id or 0
    if jid in ledger.graces:  # a running attempt's stops (budget, deadline, max_duration) use its own grace
        policy = replace(policy, stop_grace_s=ledger.graces[jid])
    if spec.budget is not None:
        caps.append(Cap("job budget", spec.budget.max_cost, ledger.jobs.get(jid, Totals()), jid))
    if sweep is not None and sweep.max_cost is not None:
        caps.append(Cap(f"sweep {sweep.name} budget", sweep.max_cost, ledger.sweeps.get(sweep.id, Totals()), jid))
    if policy.daily_cap is not None:
        caps.append(Cap("daily budget", policy.daily_cap, ledger.day, jid, daily=True))
    stop, hold = None if runs_on else _budget_stop(caps, now, policy), None
    if stop is None and prune is not None:
        stop = Stop(TerminationReason.PRUNED, JobStatus.PRUNED, prune)
    if stop is None and wait is not None and job.status in IN_FLIGHT:
        stop = Stop(TerminationReason.HELD, JobStatus.HELD, wait)
    if sweep is not None and sweep.deadline is not None and now >= sweep.deadline:
        when = f"{sweep.deadline:%Y-%m-%d %H:%M} UTC"
        stop = stop or Stop(TerminationReason.CANCELLED, JobStatus.CANCELLED,
                            f"stopped cleanly at the sweep deadline {when}")
        hold = Hold(JobStatus.CANCELLED, f"not started by the sweep deadline {when}")
    elif sweep is not None and job.status not in IN_FLIGHT and sweep.in_flight >= sweep.max_parallel:
        hold = Hold(job.status if job.status == JobStatus.HELD else JobStatus.QUEUED,
                    f"waiting for a slot: sweep {sweep.name} runs {sweep.max_parallel} at a time")
    elif sweep is not None and job.status == JobStatus.QUEUED and sweep.held and jid not in sweep.resuming:
        hold = Hold(JobStatus.QUEUED, f"waiting: held trials of sweep {sweep.name} resume first")
    elif wait is not None and job.status not in IN_FLIGHT:
        hold = Hold(JobStatus.HELD if job.status == JobStatus.HELD else JobStatus.QUEUED, wait.replace(
            "held:", "waiting:", 1))
    ckpt = spec.checkpoint.interval if spec.checkpoint is not None else None
    waiting = JobStatus.HELD if job.status == JobStatus.HELD else JobStatus.QUEUED
    return Gate(now, policy, tuple(caps), stop, hold, ckpt, waiting)
