"""How ``decide`` applies a job's ``Gate`` (gpuorch.money.caps): caps and sweep limits. Pure.

Two hooks: ``stop_running`` for the job's live attempt, ``gate_launch`` before a launch.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuorch.money.caps import Hold
from gpuorch.placement import Candidate
from gpuorch.store.models import AttemptStatus
from gpuorch.reconciler.actions import Decision, End, SetJob, StopCleanly, Terminate

if TYPE_CHECKING:
    from gpuorch.reconciler.decide import AttemptView, JobView, Settings


def stop_running(view: JobView, current: AttemptView, now: datetime, d: Decision, s: Settings) -> bool:
    """If the gate says stop and the attempt has an instance: add the stop; True if it did.

    A job with a checkpoint config and an agent up gets a clean stop (final checkpoint within the
    stop grace, then the instance is terminated); otherwise there is nothing to save and the
    instance is terminated at once.
    """
    stop = view.gate.stop if view.gate is not None else None
    inst = current.instance
    if stop is None or current.row.status == AttemptStatus.REQUESTED or inst is None or not inst.state.alive:
        return False
    number = current.row.number
    if view.spec.checkpoint is not None and current.agent is not None:
        until = now + timedelta(seconds=view.gate.policy.stop_grace_s)  # type: ignore[union-attr]
        d.add(StopCleanly(number, until, stop.reason, stop.job_status, stop.message, stop.not_before))
    else:
        d.add(Terminate(number, inst.id))
        d.add(End(number, stop.reason, stop.message, status=current.agent))
        d.add(SetJob(stop.job_status, stop.message, not_before=stop.not_before, finished=stop.job_status.terminal))
    d.soon(s.poll_s)
    return True


def _hold(h: Hold, now: datetime, d: Decision, s: Settings) -> None:
    d.add(SetJob(h.status, h.message, not_before=h.not_before, finished=h.finished))
    if not h.finished:
        d.soon((h.not_before - now).total_seconds() if h.not_before else s.poll_s)


def gate_launch(view: JobView, ranked: list[Candidate], now: datetime, d: Decision, s: Settings) -> list[Candidate] | None:
    """The candidates the job may launch on now, or None after adding why it may not launch."""
    gate = view.gate
    if gate is None:
        return ranked
    if gate.hold is not None:
        _hold(gate.hold, now, d, s)
        return None
    affordable = [c for c in ranked if gate.affords(c)]
    if ranked and not affordable:
        _hold(gate.unaffordable(ranked), now, d, s)
        return None
    return affordable
