"""The decide stage: from one job's ``JobView`` (views.py) to actions. Pure.

No I/O and no clock reads: everything arrives in the view. Each call is level-triggered: it
looks at the state as it is now, so running it twice, or after a crash at any point of the
previous pass, leads to the same place.

``decide`` runs named sub-steps in order; each returns a ``Step`` (actions, a requeue time, and
whether to stop there) and none mutates a shared decision:

1. ``draining`` (attempt_steps.py) for every attempt draining after a notice or a clean stop;
2. ``_finished_by_drain``: a draining attempt finished the job; its replacement is not needed;
3. ``_current``: the job's live attempt (cancel, its end, a notice, the caps' stop
   (gates.py), the lifetime limits (limits.py) and the deadline's move (deadline.py));
4. ``_limits``: what keeps the job from launching again (terminal, cancelled, retry limits,
   ``not_before``);
5. ``_launch``: the caps' gate, owned capacity first (owned.py) and the deadline's choice of
   market, then the Launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from gpuorch.clock import scale_of, wall_s
from gpuorch.placement import Candidate, OfferIndex, candidates
from gpuorch.placement.cost import with_job
from gpuorch.policy.recovery import RecoveryContext, get_strategy
from gpuorch.provider.port import Offer
from gpuorch.reconciler.decide.actions import GO_ON, Decision, Drain, End, Launch, SetJob, Step, done
from gpuorch.reconciler.decide.attempt_steps import admission, draining, live, lost_work_s, terminate_if_alive
from gpuorch.reconciler.decide.deadline import applies, deadline_launch, deadline_move
from gpuorch.reconciler.decide.gates import gate_launch, notice_drain, stop_running
from gpuorch.reconciler.decide.limits import lifetime_stop, stopped_box
from gpuorch.reconciler.decide.owned import admission_bound, full_now, owned_first
from gpuorch.reconciler.decide.warm import with_end
from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

__all__ = ["AttemptView", "JobView", "Settings", "decide", "lost_work_s", "recovery_context"]

Avoid = Callable[[Candidate], bool] | None
Offers = Sequence[Offer] | OfferIndex  # the daemon passes its index, kept across passes
HEAD = 4  # a plain launch ranks launch_fanout x HEAD candidates, not the whole catalog


class Replacing(NamedTuple):
    """Why the job needs a new attempt, as the current attempt's sub-step left it."""

    preemptions: int
    failures: int
    drained: AttemptView | None = None  # got a notice this pass
    drain: Drain | None = None  # ... and its Drain
    preempted: AttemptView | None = None  # got a notice or was reclaimed this pass


def recovery_context(view: JobView, now: datetime, s: Settings, preempting: AttemptView | None) -> RecoveryContext:
    """The job's recent preemptions, for the recovery strategy: the newest one's region, and every
    market that preempted or lost the job within ``avoid_preempted_zone_s`` (of its provider's
    market time: ``Settings.time_scales``)."""
    hit = [a.row for a in view.attempts
           if a.row.reason in (TerminationReason.PREEMPTED, TerminationReason.LOST)
           or a.row.status == AttemptStatus.DRAINING]
    if preempting is not None and all(r.number != preempting.row.number for r in hit):
        hit.append(preempting.row)  # noticed this pass: not yet recorded as draining
    window, scales = s.avoid_preempted_zone_s, dict(s.time_scales)  # market seconds, on a simulated market
    recent = frozenset((r.provider, r.zone, r.spot) for r in hit
                       if (when := r.notice_at or r.ended_at) is None
                       or (now - when).total_seconds() * scales.get(r.provider, 1.0) < window)
    last = max(hit, key=lambda r: r.number, default=None)
    return RecoveryContext(preempted_region=(last.provider, last.region) if last else None,
                           preempted_spot=last.spot if last else None, recent=recent, avoid_s=s.avoid_preempted_zone_s)


def _ranked(view: JobView, now: datetime, offers: Offers, avoid: Avoid, s: Settings,
            preempting: AttemptView | None, limit: int | None = None) -> list[Candidate]:
    """Candidates in the order the job's recovery strategy (or the daemon's) wants them tried
    (with ``limit``: the cheapest ``limit`` only, for a job whose strategy keeps price order).

    A job's volume pins it to the volume's zone (see volumes.py): placement requires that zone.
    """
    strategy = get_strategy(view.spec.recovery.strategy if view.spec.recovery else s.recovery_strategy)
    options = with_job(view.spec, None, s.max_nodes, s.storage_rates)  # a gang's nodes, a volume's storage
    ranked = candidates(view.spec, offers, avoid=avoid, volume_zone=view.job.volume_zone, limit=limit, options=options)
    return strategy.rank(ranked, recovery_context(view, now, s, preempting))


def _head(view: JobView, now: datetime, s: Settings, preempting: AttemptView | None) -> int | None:
    """How many candidates a launch needs ranked: a head of the price order when what follows
    keeps that order (no preemption history for the strategy to reorder by, no deadline policy
    reading the whole ranking), else None (all of them). The caps' filter may still need more:
    ``_launch`` then ranks everything."""
    ctx = recovery_context(view, now, s, preempting)
    if ctx.recent or ctx.preempted_region is not None or ctx.preempted_spot is not None or applies(view):
        return None
    return max(1, s.launch_fanout) * HEAD


def _won(view: JobView) -> AttemptView | None:
    return next((a for a in view.attempts if a.row.reason == TerminationReason.SUCCEEDED), None)


def _finished_by_drain(view: JobView, so_far: Sequence[object], current: AttemptView | None, s: Settings) -> Step:
    """A draining attempt finished the job (this pass, or a pass that died before marking the
    job): stop the current attempt, which is not needed, and mark the job succeeded."""
    ended = next((x for x in so_far if isinstance(x, End) and x.reason == TerminationReason.SUCCEEDED), None)
    won = _won(view)
    if ended is not None:
        by, message = ended.attempt, ended.message
    elif won is not None and current is not None:
        by, message = won.row.number, won.row.message or "succeeded"
    else:
        return GO_ON
    if current is not None and not current.observed:  # stop it once we can see its instance
        return done(requeue_after=s.poll_s)
    stop = () if current is None else terminate_if_alive(current) + (End(
        current.row.number, TerminationReason.CANCELLED, f"not needed: attempt {by} finished the job during its notice",
        status=current.agent),)
    return done(*stop, SetJob(JobStatus.SUCCEEDED, message, finished=True))


def _current(view: JobView, current: AttemptView, now: datetime, offers: Offers, avoid: Avoid,
             s: Settings) -> tuple[Step, Replacing]:
    """The job's live attempt: a done step while it goes on, else why it needs replacing."""
    job = view.job
    keep = Replacing(job.preemptions, job.failures)  # a tuple: cheap
    if not current.observed:
        return done(requeue_after=s.poll_s), keep
    if job.cancel_requested:
        return done(*terminate_if_alive(current),
                    End(current.row.number, TerminationReason.CANCELLED, "cancelled by user", status=current.agent),
                    SetJob(JobStatus.CANCELLED, "cancelled by user", finished=True)), keep
    step, end = live(current, now, s, admission_bound(view, current, now, s, offers, avoid))  # max_wait, Kueue
    drain = step.actions[-1] if step.actions and isinstance(step.actions[-1], Drain) else None  # live puts it last
    if drain is not None and view.gate is not None:  # a capped job drains a notice for its own grace
        step, drain = notice_drain(step, drain, now, view.gate.policy.stop_grace_s)
    if end is None and drain is None:  # it goes on, unless the caps or the deadline stop it
        stop = stop_running(view, current, now, s)
        if not stop.done:
            stop = lifetime_stop(view, current, now, s)  # max_duration, a dev box's idle_stop
        if not stop.done:
            stop = deadline_move(view, current, now, s, lambda: _ranked(view, now, offers, avoid, s, None))
        if stop.done:
            return Step(step.actions + stop.actions, _min(step.requeue_after, stop.requeue_after), True), keep
        running = current.agent is not None and current.agent.state not in ("starting",)
        want = JobStatus.RUNNING if running else (
            JobStatus.RECOVERING if job.preemptions and job.status == JobStatus.RECOVERING else JobStatus.STARTING)
        status = admission(current, want, job.message) or ((SetJob(want),) if job.status != want else ())
        return Step(step.actions + status, step.requeue_after, True), keep
    if end is None:  # a notice: the replacement is requested now, not after the kill
        return step, Replacing(job.preemptions + 1, job.failures, current, drain, current)
    step = with_end(view, current, step, end, now)  # its instance terminated, or kept warm (warm.py)
    if end.reason == TerminationReason.SUCCEEDED:
        return Step(step.actions + (SetJob(JobStatus.SUCCEEDED, end.message, finished=True),), step.requeue_after,
                    True), keep
    if end.reason.counts_as == "preemption":
        return step, Replacing(job.preemptions + 1, job.failures, preempted=current)
    return step, Replacing(job.preemptions, job.failures + (end.reason.counts_as == "failure"))


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _limits(view: JobView, r: Replacing, now: datetime) -> Step:
    """What keeps the job from launching again: a done step, or GO_ON."""
    job, retry = view.job, view.spec.retry
    if job.status.terminal:
        return done()
    won = _won(view)
    if won is not None:  # recorded by a pass that died before it could mark the job: never run it again
        return done(SetJob(JobStatus.SUCCEEDED, won.row.message or "succeeded", finished=True))
    if job.cancel_requested:
        return done(SetJob(JobStatus.CANCELLED, "cancelled by user", finished=True))
    if r.failures > retry.max_failures:
        return done(SetJob(JobStatus.FAILED, f"failed {r.failures} time(s); retry.max_failures is {retry.max_failures}",
                           finished=True))
    if r.preemptions > retry.max_preemptions:
        return done(SetJob(JobStatus.FAILED, f"preempted {r.preemptions} time(s); retry.max_preemptions is "
                           f"{retry.max_preemptions}", finished=True))
    if job.not_before is not None and now < job.not_before and r.drained is None:
        return done(requeue_after=(job.not_before - now).total_seconds())
    return GO_ON


def _launch(view: JobView, r: Replacing, now: datetime, offers: Offers, avoid: Avoid, s: Settings) -> Step:
    """Launch the job's next attempt on the best candidates the caps and the deadline allow."""
    limit = _head(view, now, s, r.preempted)
    head = _ranked(view, now, offers, avoid, s, r.preempted, limit)
    ranked, gated = gate_launch(view, head, now, s)
    capped = view.gate is not None and view.gate.hold is None  # the caps filter candidates one by one
    if limit is not None and len(head) >= limit and capped and len(ranked) < s.launch_fanout:
        # they filtered the head below what a launch tries: rank the whole catalog after all
        ranked, gated = gate_launch(view, _ranked(view, now, offers, avoid, s, r.preempted), now, s)
    if gated.done:
        return gated
    ranked, owned, chosen = owned_first(view, ranked, now, offers, avoid, s)  # owned capacity first (owned.py)
    if owned.done:
        return owned
    ranked, chose = (ranked, GO_ON) if chosen else deadline_launch(view, ranked, now, s)
    if chose.done:
        return chose
    chose = Step(owned.actions + chose.actions)
    if not ranked:  # an offer may come back on any provider: the retry is the fastest market's length
        retry = wall_s(s.no_offer_retry_s, scale_of(s.time_scales))
        return Step(chose.actions + (SetJob(
            JobStatus.QUEUED, "no offer fits the job right now (all filtered, backed off or without capacity)",
            not_before=now + timedelta(seconds=retry)),), retry, True)
    predecessor, deadline = None, None
    if r.drained is not None:
        predecessor, deadline = r.drained.row.number, r.drain.until  # type: ignore[union-attr]
    else:  # noticed in an earlier pass (a restarted daemon, a launch that found no capacity): the
        # replacement still waits for that attempt's final checkpoint, or its deadline
        drains = [a.row for a in view.attempts if a.row.status == AttemptStatus.DRAINING]
        if drains:
            predecessor, deadline = drains[-1].number, drains[-1].drain_until
    return Step(chose.actions + (Launch(tuple(ranked[: s.launch_fanout]), predecessor=predecessor,
                                        predecessor_deadline=deadline),), s.poll_s, True)


def decide(view: JobView, now: datetime, offers: Offers, *, avoid: Avoid = None,
           settings: Settings | None = None) -> Decision:
    s = settings or Settings()
    d = Decision()
    for a in view.attempts:
        if a.row.status == AttemptStatus.DRAINING:
            d.take(draining(a, now, s))
    current = view.attempts[-1] if view.attempts and view.attempts[-1].row.status.live else None
    if d.take(_finished_by_drain(view, d.actions, current, s)):
        return d
    if current is not None:
        step, replacing = _current(view, current, now, offers, avoid, s)
        if d.take(step):
            return d
        avoid = full_now(avoid, current, step.actions)  # an admission wait it ended: that class is full now
    else:
        replacing = Replacing(view.job.preemptions, view.job.failures)
    if d.take(_limits(view, replacing, now)) or d.take(stopped_box(view)):  # a box idle stop holds waits
        return d
    d.take(_launch(view, replacing, now, offers, avoid, s))
    return d
