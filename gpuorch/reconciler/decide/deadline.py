"""How ``decide`` applies a job's ``deadline`` (gpuorch.policy.live). Pure.

Two sub-steps of ``decide``, like gates.py (each returns a ``Step``, mutating nothing):
``deadline_launch`` narrows the candidates of a launch to what the policy chose (spot in one
market first, on-demand) or holds the job (waiting for spot);
``deadline_move`` stops a running spot attempt cleanly when the deadline needs on-demand.
Each decision that changes something is recorded as a ``deadline`` event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuorch.clock import scale_of, wall_s
from gpuorch.jobs.spec import SpotPolicy
from gpuorch.money.caps import Policy
from gpuorch.placement import Candidate
from gpuorch.policy.live import (
    DAY_S,
    LiveDecision,
    Market,
    Situation,
    decide_live,
    progress,
    startup_estimate,
    work_estimate,
)
from gpuorch.reconciler.decide.actions import GO_ON, End, Note, SetJob, Step, StopCleanly, Terminate, done
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

if TYPE_CHECKING:
    from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings

WAITING = "deadline policy: waits for spot"
PROBE_MAX_S = 1800.0  # the longest a market without capacity goes unprobed while the job waits
NEVER_RAN = (TerminationReason.NO_CAPACITY, TerminationReason.LAUNCH_FAILED)
BACKED_OFF = (TerminationReason.PREEMPTED, TerminationReason.LOST, TerminationReason.NO_CAPACITY)


def applies(view: JobView) -> bool:
    """The policy chooses markets only where the spec leaves the choice (spot_policy auto)."""
    return view.spec.deadline is not None and view.spec.spot_policy == SpotPolicy.AUTO


def market_key(provider: str, region: str, zone: str) -> str:
    return f"{provider}/{region}/{zone}"


def _key(c: Candidate) -> str:
    return market_key(c.offer.provider, c.offer.region, c.offer.zone)


def _ts(epoch: float | None, like: datetime) -> datetime | None:
    return datetime.fromtimestamp(epoch, like.tzinfo) if epoch is not None else None


def _markets(view: JobView, ranked: Sequence[Candidate], now: datetime,
             scales: tuple[tuple[str, float], ...] = ()) -> tuple[Market, ...]:
    """Spot markets among the candidates, placement order; each one's run since it last preempted
    the job or had no capacity for it (a day when it never did), in its provider's market seconds."""
    last_hit: dict[str, datetime] = {}
    for a in view.attempts:
        r = a.row
        draining = r.status == AttemptStatus.DRAINING and r.reason != TerminationReason.MOVED  # a move is no hit
        if r.spot and (r.reason in BACKED_OFF or draining):
            when = r.notice_at or r.ended_at or now
            key = market_key(r.provider, r.region, r.zone)
            last_hit[key] = max(last_hit.get(key, when), when)
    out: dict[str, Market] = {}
    for c in ranked:
        key = market_key(c.offer.provider, c.offer.region, c.offer.zone)
        if c.spot and key not in out:
            hit = last_hit.get(key)
            up = (now - hit).total_seconds() * scale_of(scales, c.offer.provider) if hit else DAY_S
            out[key] = Market(key, min(DAY_S, up))
    return tuple(out.values())


def probe_held(view: JobView, now: datetime, scales: tuple[tuple[str, float], ...] = ()) -> set[str]:
    """Spot markets not to probe again yet: each launch that finds no capacity is an attempt row,
    so a job waiting for spot probes a market that keeps refusing less and less often.

    A market's run of no-capacity answers starts at its first refusal since the job last got an
    instance there; after a refusal at ``last`` the market is held until ``last`` plus the run's
    length so far (at most ``PROBE_MAX_S``), on top of the daemon's back-off of the offer class.
    With a 5 min back-off the probes come at 0, 5, 10, 20, 40, 70, 100 ... min: a handful of rows
    per market in the first hour, then two an hour, instead of twelve. ``PROBE_MAX_S`` is market
    time: on a simulated market (``scales``: ``Settings.time_scales``) it rests its wall length.
    """
    first: dict[str, datetime] = {}
    last: dict[str, datetime] = {}
    longest: dict[str, float] = {}
    for a in view.attempts:
        r = a.row
        if not r.spot:
            continue
        key = market_key(r.provider, r.region, r.zone)
        if r.reason == TerminationReason.NO_CAPACITY:
            when = r.ended_at or r.requested_at or now
            first.setdefault(key, when)
            last[key] = when
            longest[key] = wall_s(PROBE_MAX_S, scale_of(scales, r.provider))
        elif r.launched_at is not None:  # it had capacity: a new run starts at the next refusal
            first.pop(key, None)
            last.pop(key, None)
    return {key for key, when in last.items()
            if now < when + timedelta(seconds=min(longest[key], (when - first[key]).total_seconds()))}


def situation(view: JobView, ranked: Sequence[Candidate], now: datetime, s: Settings,
              current: AttemptView | None = None) -> tuple[Situation, float | None]:
    """The job at this decision point, and the most hours a candidate may take (None: any)."""
    spec, job = view.spec, view.job
    assert spec.deadline is not None
    deadline = spec.deadline.resolve(job.created_at)
    startup = startup_estimate(spec.deadline.startup, ranked)
    work_s, max_hours = work_estimate(spec.deadline.job_hours, ranked, (deadline - job.created_at).total_seconds(),
                                      startup)
    spans = []
    for a in view.attempts:
        r, agent = a.row, a.agent
        start, ckpt = r.started_at, r.last_checkpoint_at
        if agent is not None and agent.running_since is not None:  # fresher than the row
            start = _ts(agent.running_since, now)
            ckpt = max(filter(None, [ckpt, _ts(agent.last_checkpoint_at, now)]), default=None)
        live = a is current
        spans.append((start, ckpt, None if live else (r.ended_at or now)))
    done, unsaved = progress(spans, now, spec.checkpoint is not None)
    running = market = None
    starting = 0.0
    if current is not None:
        r = current.row
        running = "spot" if r.spot else "on-demand"
        market = market_key(r.provider, r.region, r.zone) if r.spot else None
        if r.started_at is None and (current.agent is None or current.agent.running_since is None):
            starting = max(0.0, startup - (now - (r.launched_at or r.requested_at or now)).total_seconds())
    margin = 2 * s.poll_s + s.default_notice_s  # notice it, relaunch
    # The last attempt that got an instance was moved off spot: its replacement goes on-demand,
    # however many launches since found no capacity.
    ran = [a.row for a in view.attempts if a.row.reason not in NEVER_RAN]
    moved = bool(ran) and ran[-1].reason == TerminationReason.MOVED
    sit = Situation(job.created_at, deadline, now, work_s, done, startup,
                    spec.checkpoint.interval if spec.checkpoint else None, _markets(view, ranked, now, s.time_scales),
                    running, market, unsaved, starting, margin, moved)  # type: ignore[arg-type]
    return sit, max_hours


def _note(decision: LiveDecision, sit: Situation, attempt: int | None = None) -> Note:
    return Note("deadline", f"deadline policy {decision.reason}", attempt=attempt, data={
        "decision": decision.kind, "market": decision.market, "slack_h": round(decision.slack_s / 3600, 3),
        "reserve_h": round(decision.reserve_s / 3600, 3), "done_h": round(sit.done_s / 3600, 3),
        "work_h": round(sit.work_s / 3600, 3), "deadline": sit.deadline.isoformat()})


def deadline_launch(view: JobView, ranked: list[Candidate], now: datetime, s: Settings) -> tuple[list[Candidate], Step]:
    """The candidates to launch on, in order, with the step recording the choice; or a done step
    saying why the job waits."""
    if not applies(view) or not ranked:
        return ranked, GO_ON
    held = probe_held(view, now, s.time_scales)
    if held:  # as if backed off: "no spot" there, so the policy waits or goes on-demand
        ranked = [c for c in ranked if not c.spot or _key(c) not in held]
        if not ranked:
            return ranked, GO_ON
    sit, max_hours = situation(view, ranked, now, s)
    fast = [c for c in ranked if max_hours is None or c.est_hours <= max_hours * (1 + 1e-9)]
    if fast != ranked:
        sit, _ = situation(view, fast, now, s)
    decision = decide_live(sit)
    if decision.kind == "wait":
        message = (f"{WAITING} capacity; slack {decision.slack_s / 3600:.1f} h, "
                   f"reserve {decision.reserve_s / 3600:.1f} h")
        notes = () if (view.job.message or "").startswith(WAITING) else (_note(decision, sit),)
        # spot comes back on its market's clock: the re-check is the length of the candidates' fastest
        scale = max((scale_of(s.time_scales, c.offer.provider) for c in ranked), default=1.0)
        recheck = wall_s(decision.recheck_s, scale)
        hold = SetJob(JobStatus.QUEUED, message, not_before=now + timedelta(seconds=recheck))
        return [], done(*notes, hold, requeue_after=recheck)
    chose = Step((_note(decision, sit),))
    if decision.kind == "spot":
        key = decision.market
        same = [c for c in fast if c.spot and market_key(c.offer.provider, c.offer.region, c.offer.zone) == key]
        return same + [c for c in fast if c.spot and c not in same], chose
    on_demand = [c for c in fast if not c.spot]
    return on_demand or fast, chose


def deadline_move(view: JobView, current: AttemptView, now: datetime, s: Settings,
                  ranked: Callable[[], list[Candidate]]) -> Step:
    """Stop a running spot attempt (final checkpoint first) when the deadline needs on-demand
    (a done step), else GO_ON. The next pass launches the on-demand replacement."""
    inst, row = current.instance, current.row
    if (not applies(view) or not row.spot or row.status == AttemptStatus.REQUESTED
            or inst is None or not inst.state.alive):
        return GO_ON
    sit, _ = situation(view, ranked(), now, s, current)
    decision = decide_live(sit)
    if not decision.move:
        return GO_ON
    note = _note(decision, sit, attempt=row.number)
    message = f"deadline policy {decision.reason}"
    if view.spec.checkpoint is not None and current.agent is not None:
        grace = (view.gate.policy if view.gate is not None else Policy()).stop_grace_s
        until = now + timedelta(seconds=grace)
        return done(note, StopCleanly(row.number, until, TerminationReason.MOVED, JobStatus.RECOVERING, message),
                    requeue_after=s.poll_s)
    return done(note, Terminate(row.number, inst.id),
                End(row.number, TerminationReason.MOVED, message, status=current.agent),
                SetJob(JobStatus.RECOVERING, message), requeue_after=s.poll_s)
