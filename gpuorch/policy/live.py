"""The deadline-aware spot policy applied to a live job: one pure function, ``decide_live``.

The daemon calls it at each decision point of a job with a ``deadline`` (a launch, a relaunch
after a preemption or a notice, every pass while an attempt runs on spot, and every minute while
the job waits). It does not fork the simulator's policy: it maps the job onto the simulator's
vocabulary (``gpuorch.policy.model``) and asks :class:`~gpuorch.policy.deadline.GpuorchPolicy`:

- ticks of ``GAP_S`` (a minute), counted from the job's submission, so that the policy's reserve
  (the Uniform Progress line in slack terms) is measured over the job's whole life;
- work is the job's hours; progress is what its checkpoints saved (``progress`` below);
- a changeover is one launch's start-up (boot, setup, restore) plus the time the daemon needs to
  notice a preemption and act (``margin_s``);
- the "zones" are the spot markets (provider/region/zone) the job may use that have capacity now,
  in placement order; a market's run of availability is how long since it last preempted the job
  or had no capacity for it (``Market.up_s``).

Two live rules sit around the simulator's, because a live preemption loses the work since the
last checkpoint (the simulator checkpoints every tick):

- *spot must leave room for a checkpoint*: a spot launch is considered only if, after it and one
  more start-up, the slack still covers one checkpoint interval (for a job without checkpoints:
  all the remaining work, which a preemption would throw away);
- *a running spot attempt is moved to on-demand* (stopped cleanly, with a final checkpoint) once
  a preemption before the daemon's next look would leave on-demand too little time from the last
  saved checkpoint. The simulator's rule "keep spot until it is preempted" holds until then. Its
  replacement runs on on-demand (it would be as risky on spot again: the job checkpoints more
  rarely than the slack allows).

A running on-demand attempt is never moved back to spot here (a move costs a clean stop and a
start-up; the simulator's rule for it assumes free checkpoints): the job stays on on-demand.
docs/policy.md ("The live policy") has the rules and an example timeline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from gpuorch.policy.deadline import GpuorchPolicy
from gpuorch.policy.model import OD, ON_DEMAND, SPOT, Job, Observation, State

GAP_S = 60  # live decisions are taken in ticks of one minute
DAY_S = 86400.0
Kind = Literal["spot", "on-demand", "wait", "keep", "move"]


@dataclass(frozen=True)
class Market:
    """A spot market the job may launch in now (it has capacity, as far as the daemon knows)."""

    key: str  # provider/region/zone
    up_s: float = DAY_S  # how long it has been usable in a row (since it last preempted the job)
    uptime: float = 1.0  # share of the last day it was usable


@dataclass(frozen=True)
class Situation:
    """A job with a deadline at one decision point. Durations in seconds."""

    submitted: datetime  # the deadline clock's start: the policy's reserve spans the job's life
    deadline: datetime
    now: datetime
    work_s: float  # the whole job's work (running time on its GPU)
    done_s: float  # work saved by checkpoints (what a relaunch resumes from)
    startup_s: float  # one launch's overhead before work resumes: boot, setup, restore
    checkpoint_s: float | None  # the job's checkpoint interval; None: it does not checkpoint
    markets: tuple[Market, ...] = ()  # spot markets with capacity now, best placement first
    running: Literal["spot", "on-demand"] | None = None  # the live attempt's market, if any
    running_market: str | None = None  # its provider/region/zone when on spot
    unsaved_s: float = 0.0  # work the running attempt did since its last checkpoint
    starting_s: float = 0.0  # start-up the running attempt has still to go through
    margin_s: float = 0.0  # how long the daemon may take to notice a preemption and relaunch
    moved: bool = False  # the last attempt was moved off spot by this policy: relaunch on on-demand


@dataclass(frozen=True)
class LiveDecision:
    """``kind``: ``spot`` / ``on-demand`` / ``wait`` for a launch, ``keep`` (the running attempt
    stays where it is) or ``move`` (stop the running spot attempt cleanly, relaunch on-demand)."""

    kind: Kind
    market: str | None  # the spot market for ``spot`` and for a kept spot attempt
    reason: str  # for people: the rule and its numbers
    slack_s: float  # time the job may still lose (idling, restarts) and finish on on-demand
    reserve_s: float  # slack the policy keeps in hand now before it pays for on-demand
    recheck_s: float = float(GAP_S)  # look again within this long (waiting)

    @property
    def move(self) -> bool:
        return self.kind == "move"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if abs(seconds) >= 3600 else f"{seconds / 60:.0f} min"


def sim_job(sit: Situation) -> Job:
    """The simulator's job for this situation (prices do not enter the policy's decisions)."""
    return Job(work_s=max(1, math.ceil(sit.work_s)),
               deadline_s=max(0, math.floor((sit.deadline - sit.submitted).total_seconds())),
               changeover_s=round(sit.startup_s + sit.margin_s), gap_s=GAP_S, on_demand_price=1.0, spot_price=0.3)


def _tick(sit: Situation) -> int:
    return max(0, math.floor((sit.now - sit.submitted).total_seconds() / GAP_S))


def slack_s(sit: Situation, changeovers: int = 1) -> float:
    """Time the job may still lose from its saved progress and finish with ``changeovers``
    start-ups (negative: the deadline can no longer be met that way)."""
    job = sim_job(sit)
    state = State(_tick(sit), min(job.work_s, math.floor(sit.done_s)), None, 0)
    return float(state.slack_ticks(job, changeovers) * GAP_S)


@dataclass(frozen=True)
class _Point:
    """What every rule of ``decide_live`` reads: the simulator's job, its saved state, the slack
    from the last checkpoint and the reserve the policy keeps in hand."""

    job: Job
    saved: State
    slack: float
    reserve: float

    def out(self, kind: Kind, market: str | None, reason: str) -> LiveDecision:
        return LiveDecision(kind, market, reason, self.slack, self.reserve)


def _point(sit: Situation, policy: GpuorchPolicy) -> _Point:
    job, tick = sim_job(sit), _tick(sit)
    saved = State(tick, min(job.work_s, math.floor(sit.done_s)), None, 0)
    slack = float(saved.slack_ticks(job, 1) * GAP_S)
    keys = [m.key for m in sit.markets]
    if sit.running == SPOT and sit.running_market is not None and sit.running_market not in keys:
        keys.append(sit.running_market)
    reserve = policy.reserve_ticks(job, saved, max(1, len(keys))) * GAP_S
    return _Point(job, saved, slack, reserve)


def decide_live(sit: Situation, policy: GpuorchPolicy | None = None) -> LiveDecision:
    """Spot (where), on-demand, or wait; and whether a running spot attempt must move."""
    policy = policy or GpuorchPolicy()
    p = _point(sit, policy)
    if sit.running == ON_DEMAND:
        return p.out("keep", None, f"stays on on-demand (slack {_hours(p.slack)})")
    if sit.running == SPOT:
        return _running_spot(sit, p)
    if sit.moved:  # the move's replacement; spot would be as risky again (the simulator's rule 3)
        return p.out("on-demand", None, f"on-demand: moved off spot for the deadline (slack {_hours(p.slack)})")
    # A launch: ask the simulator's policy, spot markets offered only where a spot run leaves room
    # for one checkpoint interval (the work a preemption may throw away) after two start-ups.
    at_risk = sit.checkpoint_s if sit.checkpoint_s is not None else p.job.work_s - p.saved.done_s
    if sit.markets and (p.saved.slack_ticks(p.job, 2) - 1) * GAP_S < at_risk:  # waiting cannot make it safer
        return _spot_too_risky(p, at_risk)
    return _launch(sit, p, policy, at_risk)


def _running_spot(sit: Situation, p: _Point) -> LiveDecision:
    """A running spot attempt: keep it, or move it to on-demand while a preemption can still be absorbed."""
    # A preemption before the next look restarts from the last checkpoint, with a start-up.
    if p.saved.slack_ticks(p.job, 1) <= 1:
        lost = "the work since its last checkpoint" if sit.checkpoint_s is not None else "all its work"
        return p.out("move", None, f"moves to on-demand: a preemption now would cost {lost} and leave "
                     f"{_hours(max(0.0, p.slack))} of slack")
    return p.out("keep", sit.running_market, f"keeps spot in {sit.running_market} (slack {_hours(p.slack)} "
                 "from the last checkpoint)")


def _spot_too_risky(p: _Point, at_risk: float) -> LiveDecision:
    """A launch where spot markets have capacity but a spot run leaves no room for a preemption."""
    slack = p.slack
    why = ("only on-demand still meets the deadline" if p.saved.slack_ticks(p.job, 1) <= 0 else
           f"spot is too risky: slack {_hours(slack)} cannot absorb a preemption ({_hours(at_risk)} of work at "
           "risk) and a second start-up")
    if slack < 0:
        why = f"the deadline can no longer be met (short by {_hours(-slack)}); finishing as soon as possible"
    return p.out("on-demand", None, f"on-demand: {why}")


def _launch(sit: Situation, p: _Point, policy: GpuorchPolicy, at_risk: float) -> LiveDecision:
    """A launch the simulator's policy decides: spot in a market, on-demand, or wait for spot."""
    job, saved, slack, reserve = p.job, p.saved, p.slack, p.reserve
    usable = [True] * len(sit.markets)
    obs = Observation(spot=tuple(usable) or (False,),
                      up_ticks=tuple(int(m.up_s // GAP_S) for m in sit.markets) or (0,),
                      uptime=tuple(m.uptime for m in sit.markets) or (0.0,),
                      any_uptime=max((m.uptime for m in sit.markets), default=0.0))
    action = policy.decide(job, saved, obs)
    if action is not None and action.kind == SPOT:
        market = sit.markets[action.zone].key
        return p.out("spot", market, f"spot in {market}: slack {_hours(slack)} covers this start-up, one "
                     f"checkpoint interval and a fallback to on-demand")
    if action == OD:
        if slack < 0:
            why = f"the deadline can no longer be met (short by {_hours(-slack)}); finishing as soon as possible"
        elif saved.slack_ticks(job, 1) <= 0:
            why = f"only on-demand still meets the deadline (slack {_hours(slack)})"
        else:
            why = f"no spot capacity and slack {_hours(slack)} is down to the reserve {_hours(reserve)}"
        return p.out("on-demand", None, f"on-demand: {why}")
    if (saved.slack_ticks(job, 2) - 1) * GAP_S < at_risk:  # spot would be refused by then: waiting buys nothing
        return p.out("on-demand", None, f"on-demand: no spot capacity, and slack {_hours(slack)} could no longer "
                     f"absorb a preemption ({_hours(at_risk)} of work at risk) and a second start-up")
    if slack < reserve:  # the policy's rule 4: on-demand now would be on-demand to the end
        return p.out("wait", None, f"waits for spot capacity: slack {_hours(slack)} is below the reserve "
                     f"{_hours(reserve)}, but on-demand now would leave too little to ever move to spot")
    return p.out("wait", None, f"waits for spot capacity: slack {_hours(slack)} is above the reserve {_hours(reserve)}")


Span = tuple[datetime | None, datetime | None, datetime | None]  # (running since, last checkpoint, ended)


def progress(spans: Iterable[Span], now: datetime, checkpointed: bool) -> tuple[float, float]:
    """(saved, unsaved) seconds of work from a job's attempts, oldest first.

    Each attempt resumes from its predecessor's last checkpoint, so the saved work is the sum of
    each attempt's run time up to its own last checkpoint. ``unsaved`` is what the live attempt
    (the last span, without an end) did since its last checkpoint. A job that does not checkpoint
    has nothing saved: each attempt starts over.
    """
    saved = unsaved = 0.0
    listed: Sequence[Span] = list(spans)
    for i, (start, ckpt, end) in enumerate(listed):
        if start is None:
            continue
        if checkpointed and ckpt is not None and ckpt > start:
            saved += (ckpt - start).total_seconds()
        if end is None and i == len(listed) - 1:
            since = ckpt if checkpointed and ckpt is not None and ckpt > start else start
            unsaved = max(0.0, (now - since).total_seconds())
    return saved, unsaved


DEFAULT_STARTUP_S = 480.0  # the planner's default boot (180 s) + setup (300 s)
DEFAULT_MARGIN_S = 34.0  # the daemon's default: two polls (2 s) and a preemption notice (30 s)


class Estimate(Protocol):
    """What the deadline needs of a placement candidate (``gpuorch.placement.Candidate``)."""

    @property
    def spot(self) -> bool: ...
    @property
    def est_hours(self) -> float: ...
    @property
    def est_finish_hours(self) -> float: ...


def startup_estimate(given_s: float | None, candidates: Sequence[Estimate]) -> float:
    """One launch's start-up: the spec's ``deadline.startup``, else the planner's for on-demand
    (its expected finish minus its work), else the planner's default."""
    if given_s is not None:
        return given_s
    od = [(c.est_finish_hours - c.est_hours) * 3600 for c in candidates if not c.spot]
    return max(od) if od else DEFAULT_STARTUP_S


def work_estimate(job_hours: float | None, candidates: Sequence[Estimate], available_s: float,
                  startup_s: float) -> tuple[float, float | None]:
    """(work seconds, the most hours a candidate may take, or None for any).

    ``job_hours`` from the spec stands for every offer. Otherwise the planner's hours differ per
    GPU: the work is that of the best-ranked candidate that finishes on on-demand within
    ``available_s`` (the fastest one when none does), and only offers at least as fast may run
    the job, so the work never grows behind the policy's back.
    """
    if job_hours is not None:
        return job_hours * 3600, None
    if not candidates:
        return 0.0, None
    fits = [c for c in candidates if c.est_hours * 3600 + startup_s <= available_s]
    hours = fits[0].est_hours if fits else min(c.est_hours for c in candidates)
    return hours * 3600, hours


@dataclass(frozen=True)
class Feasibility:
    """What ``submit`` says about a deadline: ``error`` (refused), ``warning`` (accepted), or neither."""

    error: str | None = None
    warning: str | None = None


def feasibility(deadline: datetime, now: datetime, job_hours: float | None, startup_given: float | None,
                candidates: Sequence[Estimate], checkpoint_s: float | None, spot_allowed: bool) -> Feasibility:
    """Can the job meet ``deadline`` if submitted ``now``? On on-demand from the start with the
    fastest fitting offer (else refused); and with room for spot by the live policy's rule
    (else accepted with a warning that it will run on on-demand)."""
    available = (deadline - now).total_seconds()
    if available <= 0:
        return Feasibility(error=f"deadline: {deadline:%Y-%m-%d %H:%M} UTC is in the past; give a later time or a "
                                 "duration like 8h")
    startup = startup_estimate(startup_given, candidates)
    if job_hours is None and candidates:
        fastest = min(candidates, key=lambda c: c.est_hours)
        need = fastest.est_hours * 3600 + startup
        what = f"{fastest.est_hours:.1f} h of work on the fastest fitting offer"
        fix = "a later deadline, fewer model.tokens, or deadline.job_hours if the estimate is off"
    elif job_hours is not None:
        need, what = job_hours * 3600 + startup, f"deadline.job_hours {job_hours:g} h"
        fix = "a later deadline or fewer deadline.job_hours"
    else:
        return Feasibility()
    if need > available:
        return Feasibility(error=f"deadline: cannot be met even on on-demand: {_hours(available)} to the deadline, but "
                                 f"the job needs {_hours(need)} ({what} + {startup / 60:.0f} min start-up); give {fix}")
    work_s, _ = work_estimate(job_hours, candidates, available, startup)
    sit = Situation(now, deadline, now, work_s, 0.0, startup, checkpoint_s, (Market("any"),))
    decision = decide_live(sit)
    if spot_allowed and decision.kind != "spot":
        return Feasibility(warning=f"deadline: only on-demand can meet it ({_hours(decision.slack_s)} of slack "
                                   "cannot absorb a spot preemption); the job will run on on-demand")
    return Feasibility()
