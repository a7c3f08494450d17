"""How ``decide`` applies a job's ``Gate`` (gpuorch.money.caps): caps and sweep limits. Pure.

Two sub-steps of ``decide``: ``stop_running`` for the job's live attempt, ``gate_launch`` before
a launch. Each returns a ``Step`` (actions, requeue time, done) and mutates nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuorch.money.caps import Hold
from gpuorch.placement import Candidate
from gpuorch.reconciler.decide.actions import GO_ON, Drain, End, SetJob, Step, StopCleanly, Terminate, done
from gpuorch.store.states import AttemptStatus

if TYPE_CHECKING:
    from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings


def stop_running(view: JobView, current: AttemptView, now: datetime, s: Settings) -> Step:
    """If the gate says stop and the attempt has an instance: the stop (a done step), else GO_ON.

    A job with a checkpoint config and an agent up gets a clean stop (final checkpoint within the
    stop grace, then the instance is terminated); otherwise there is nothing to save and the
    instance is terminated at once, as it is when the money leaves no grace (the gate's, 0: one
    that ran on to its estimated end and has not ended, gpuorch.money.finishing).
    """
    stop = view.gate.stop if view.gate is not None else None
    inst = current.instance
    if stop is None or current.row.status == AttemptStatus.REQUESTED or inst is None or not inst.state.alive:
        return GO_ON
    number = current.row.number
    grace = view.gate.policy.stop_grace_s  # type: ignore[union-attr]
    if view.spec.checkpoint is not None and current.agent is not None and grace > 0:
        until = now + timedelta(seconds=grace)
        return done(StopCleanly(number, until, stop.reason, stop.job_status, stop.message, stop.not_before),
                    requeue_after=s.poll_s)
    return done(Terminate(number, inst.id), End(number, stop.reason, stop.message, status=current.agent),
                SetJob(stop.job_status, stop.message, not_before=stop.not_before, finished=stop.job_status.terminal),
                requeue_after=s.poll_s)


def _hold(h: Hold, now: datetime, s: Settings) -> Step:
    wait = None if h.finished else (h.not_before - now).total_seconds() if h.not_before else s.poll_s
    return done(SetJob(h.status, h.message, not_before=h.not_before, finished=h.finished), requeue_after=wait)


def gate_launch(view: JobView, ranked: list[Candidate], now: datetime, s: Settings) -> tuple[list[Candidate], Step]:
    """The candidates the job may launch on now, and GO_ON; or a done step saying why it may not."""
    gate = view.gate
    if gate is None:
        return ranked, GO_ON
    if gate.hold is not None:
        return [], _hold(gate.hold, now, s)
    affordable = [c for c in ranked if gate.affords(c)]
    if ranked and not affordable:
        return [], _hold(gate.unaffordable(ranked), now, s)
    return affordable, GO_ON


def notice_drain(step: Step, drain: Drain, now: datetime, grace_s: float) -> tuple[Step, Drain]:
    """A capped job's preemption notice drains until the cloud's deadline or the attempt's own
    stop grace from the look that saw it, whichever comes first: the final checkpoint on notice
    needs what a budget stop's does (gpuorch.money.caps ``Policy.for_attempt``), and so the
    attempt's horizon covers a notice, however long the cloud's (``step`` ends with ``drain``)."""
    until = now + timedelta(seconds=grace_s)
    if drain.until <= until:
        return step, drain
    short = replace(drain, until=until)
    return step._replace(actions=step.actions[:-1] + (short,)), short
