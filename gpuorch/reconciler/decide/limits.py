"""How ``decide`` applies a job's lifetime limits (gpuorch.jobs.lifetime). Pure.

Sub-steps of ``decide``, like gates.py (each returns a ``Step``, mutating nothing):

- ``lifetime_stop`` for the job's live attempt: ``max_duration`` (any job) ends the job once its
  running time, all attempts together, reaches the limit; ``idle_stop`` (a dev box) stops the box
  once it has been idle that long. Both stop the attempt the way the caps do: a final checkpoint
  first when the job has a checkpoint config and an agent, else a plain terminate.
- ``stopped_box`` keeps a dev box that idle stop put on hold from launching again, until
  ``gpuorch dev NAME`` queues it again (``gpuorch.devbox.boxes.restart``).

``max_duration`` ends the job as ``cancelled`` (reason ``cancelled``, a message naming the limit):
the daemon, not a failure, ended it. An idle stop holds the box (job and attempt ``held``), so its
volume, deleted only when a job ends, is kept for the next box.

Idleness comes from the box's own reports (``gpuorch.devbox.keepalive``): each line of its
metrics says how long it had been idle (``idle_s``: no SSH session open and every GPU below the
spec's ``idle_gpu_util``), read by the daemon at ``job.metrics_at``. The box is idle now for
``idle_s + (now - metrics_at)``: a box that went silent counts as idle. Before its first report
the box has been idle since the daemon saw its command start.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from gpuorch.clock import scale_of
from gpuorch.jobs.lifetime import duration_text
from gpuorch.reconciler.decide.actions import GO_ON, End, SetJob, Step, StopCleanly, Terminate, done
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

if TYPE_CHECKING:
    from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings

IDLE_HELD = "idle stop"  # the start of the message of a dev box that idle stop holds
STOP_GRACE_S = 120.0  # the final checkpoint's time when no cap policy names one


def running_s(view: JobView, now: datetime, scales: tuple[tuple[str, float], ...] = ()) -> float:
    """The job's running time so far: every attempt's run of its command (``started_at`` to its
    end, or to ``now`` for the live one), all attempts together; a dev box's since it was last
    started again (after the newest attempt idle stop held), so a box's limit holds per start.
    In market seconds: on a simulated market (``scales``: ``Settings.time_scales``) a wall second
    of an attempt there counts its provider's ``time_scale``, as the policies' durations do."""
    total = 0.0
    attempts = view.attempts
    if view.spec.kind == "dev":
        held = [i for i, a in enumerate(attempts) if a.row.reason == TerminationReason.HELD]
        attempts = attempts[held[-1] + 1:] if held else attempts
    for a in attempts:
        start = a.row.started_at
        if start is None and a.agent is not None and a.agent.running_since is not None:
            start = datetime.fromtimestamp(a.agent.running_since, now.tzinfo)
        if start is None:
            continue
        end = None if a.row.status.live else (a.row.notice_at or a.row.ended_at)  # a drained one: to its notice
        wall = max(0.0, (_aware(end or now, now) - _aware(start, now)).total_seconds())
        total += wall * scale_of(scales, a.row.provider)
    return total


def idle_s(view: JobView, current: AttemptView, now: datetime) -> float | None:
    """How long the dev box has been idle (see the module docstring); None until the daemon has
    recorded its command running (a report read before then is an earlier box's)."""
    start = current.row.started_at
    if start is None:
        return None
    start = _aware(start, now)
    metrics = _metrics(view.job.metrics)
    reported, at = metrics.get("idle_s"), view.job.metrics_at
    if isinstance(reported, int | float) and not isinstance(reported, bool) and at is not None \
            and _aware(at, now) >= start:
        return max(0.0, float(reported)) + max(0.0, (now - _aware(at, now)).total_seconds())
    return max(0.0, (now - start).total_seconds())


def lifetime_stop(view: JobView, current: AttemptView, now: datetime, s: Settings) -> Step:
    """The stop of a live attempt that a lifetime limit ends (a done step), else GO_ON."""
    spec, inst, row = view.spec, current.instance, current.row
    if row.status == AttemptStatus.REQUESTED or inst is None or not inst.state.alive:
        return GO_ON
    if spec.max_duration is not None and running_s(view, now, s.time_scales) >= spec.max_duration:
        message = (f"max_duration {duration_text(spec.max_duration)} reached: stopped by the daemon"
                   + (" after a final checkpoint" if _clean(view, current) else ""))
        return _stop(view, current, now, s, TerminationReason.CANCELLED, JobStatus.CANCELLED, message)
    if spec.kind == "dev" and spec.idle_stop is not None:
        idle = idle_s(view, current, now)
        if idle is not None and idle >= spec.idle_stop:
            message = (f"{IDLE_HELD}: no SSH session and GPU below {spec.idle_gpu_util:g} % for "
                       f"{duration_text(spec.idle_stop)}; volume kept; 'gpuorch dev {spec.name}' starts it again")
            return _stop(view, current, now, s, TerminationReason.HELD, JobStatus.HELD, message)
    return GO_ON


def stopped_box(view: JobView) -> Step:
    """A dev box that idle stop holds waits for ``gpuorch dev NAME`` (a done step), else GO_ON."""
    job = view.job
    if view.spec.kind == "dev" and job.status == JobStatus.HELD and (job.message or "").startswith(IDLE_HELD):
        return done()
    return GO_ON


def _clean(view: JobView, current: AttemptView) -> bool:
    return view.spec.checkpoint is not None and current.agent is not None


def _stop(view: JobView, current: AttemptView, now: datetime, s: Settings, reason: TerminationReason,
          status: JobStatus, message: str) -> Step:
    number, inst = current.row.number, current.instance
    assert inst is not None
    if _clean(view, current):
        grace = view.gate.policy.stop_grace_s if view.gate is not None else STOP_GRACE_S
        return done(StopCleanly(number, now + timedelta(seconds=grace), reason, status, message),
                    requeue_after=s.poll_s)
    return done(Terminate(number, inst.id), End(number, reason, message, status=current.agent),
                SetJob(status, message, finished=status.terminal), requeue_after=s.poll_s)


def _metrics(text: str | None) -> dict:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _aware(ts: datetime, like: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=like.tzinfo)
