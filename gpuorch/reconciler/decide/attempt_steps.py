"""Sub-steps of ``decide`` about one attempt: a draining attempt, the job's live attempt, and the
End an attempt gets. Pure: each returns actions (a ``Step``) and mutates nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gpuorch.clock import aware
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler.decide.actions import (
    Action,
    Adopt,
    Drain,
    End,
    Heartbeat,
    Note,
    Progress,
    Relaunch,
    SetJob,
    StartAgent,
    Step,
    Terminate,
)
from gpuorch.reconciler.decide.owned import ADMISSION as ADMISSION  # re-exported: where tests and docs name it
from gpuorch.reconciler.decide.owned import AdmissionBound
from gpuorch.reconciler.observe.views import AttemptView, Settings
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason


def from_epoch(epoch: float, tz_like: datetime) -> datetime:
    """The agent's epoch seconds as a datetime in ``tz_like``'s zone."""
    return datetime.fromtimestamp(epoch, tz_like.tzinfo)


def ts(epoch: float | None, tz_like: datetime) -> datetime | None:
    return from_epoch(epoch, tz_like) if epoch is not None else None


def lost_work_s(a: AttemptView, stopped_at: datetime) -> float:
    """Work thrown away: from the newer of this attempt's last durable checkpoint and the start of
    its job (a restored checkpoint's time is the predecessor's, and the gap between attempts is
    downtime, not work) to ``stopped_at``. 0 when the job never ran."""
    agent, row = a.agent, a.row
    if agent is not None and agent.running_since is not None:
        start, ckpt = from_epoch(agent.running_since, stopped_at), ts(agent.last_checkpoint_at, stopped_at)
    elif row.started_at is not None:  # no word from the agent: what the daemon saw of it
        start, ckpt = row.started_at, row.last_checkpoint_at
    else:
        return 0.0
    since = max(start, ckpt) if ckpt is not None else start
    return max(0.0, (stopped_at - since).total_seconds())


def stopped(inst: Instance | None, now: datetime) -> datetime:
    """When the instance stopped: the provider's word, else now (the first time it was seen gone)."""
    return inst.ended_at if inst is not None and inst.ended_at is not None and inst.ended_at <= now else now


def notice(a: AttemptView, now: datetime, s: Settings) -> tuple[datetime, datetime] | None:
    """(notice time, kill deadline) if the cloud or the agent has announced a preemption."""
    inst, agent = a.instance, a.agent
    deadline = inst.preemption_deadline if inst else None
    seen = now
    if agent and agent.notice_at is not None:
        seen = min(seen, from_epoch(agent.notice_at, now))
        deadline = deadline or ts(agent.notice_deadline, now)
    if deadline is None and not (agent and agent.notice_at is not None):
        return None
    return seen, deadline or seen + timedelta(seconds=s.default_notice_s)


def alive(inst: Instance | None) -> bool:
    return inst is not None and inst.state.alive


def terminate_if_alive(a: AttemptView) -> tuple[Action, ...]:
    return (Terminate(a.row.number, a.instance.id),) if alive(a.instance) else ()  # type: ignore[union-attr]


def draining(a: AttemptView, now: datetime, s: Settings) -> Step:
    """A draining attempt: wait for its final checkpoint (or its deadline), then stop and end it."""
    if not a.observed:
        return Step(requeue_after=s.poll_s)
    progress: tuple[Action, ...] = ()
    if a.agent is not None:
        progress = (Progress(a.row.number, a.agent),)
        if a.agent.state == "exited" and a.agent.exit_code == 0:  # it finished within its notice
            return Step(progress + terminate_if_alive(a) + (exit_end(a, now),))
    final_done = a.agent is not None and a.agent.final_done
    until = a.row.drain_until
    if alive(a.instance) and not final_done and (until is None or now < until):
        return Step(progress, requeue_after=s.poll_s)
    at = min(now, until, stopped(a.instance, now)) if until else stopped(a.instance, now)
    reason = a.row.reason or TerminationReason.PREEMPTED  # a clean stop drains too (StopCleanly)
    message = "preempted after notice" if reason == TerminationReason.PREEMPTED else (a.row.message or "stopped")
    return Step(progress + terminate_if_alive(a) + (End(a.row.number, reason, message, lost_work_s=lost_work_s(a, at),
                                                        status=a.agent),))


def _gone(a: AttemptView, now: datetime, bound: AdmissionBound | None = None) -> End:
    """The End of a live attempt whose instance is not alive any more. One that was last seen
    waiting for admission past its bound (``bound.said``: a daemon that deleted its pod died
    before it recorded the End) ends as that bound ends it: no capacity."""
    row, inst, agent = a.row, a.instance, a.agent
    if agent is not None and agent.state == "exited":
        return exit_end(a, now)
    if bound is not None and bound.left_s <= 0 and bound.said and agent is None and row.started_at is None:
        return End(row.number, TerminationReason.NO_CAPACITY, bound.why)
    at = stopped(inst, now)
    if inst is not None and inst.state == InstanceState.PREEMPTED:
        how = "after a notice the daemon missed" if agent is not None and agent.notice_at else "without notice"
        why = inst.state_reason or "no reason given"
        return End(row.number, TerminationReason.PREEMPTED, f"preempted {how} ({why})",
                   lost_work_s=lost_work_s(a, at), status=agent)
    what = "disappeared" if inst is None else f"is {inst.state.value}" + (
        f" ({inst.state_reason})" if inst.state_reason else "")
    return End(row.number, TerminationReason.LOST, f"instance {row.instance_id} {what}",
               lost_work_s=lost_work_s(a, at), status=agent)


def live(a: AttemptView, now: datetime, s: Settings, bound: AdmissionBound | None = None) -> tuple[Step, End | None]:
    """The job's current attempt, observed: what to do about it, and its End when it is over
    (a notice: the step ends with a Drain, and there is no End). ``bound``: how much longer the
    job's ``max_wait`` lets it wait for admission (``decide.owned.admission_bound``; None: no
    bound): past it, a queued attempt ends as no capacity and its instance goes."""
    row, inst, agent = a.row, a.instance, a.agent
    if row.status == AttemptStatus.REQUESTED:
        if inst is not None:
            return Step((Adopt(row.number, inst),), requeue_after=0), None
        return Step((Relaunch(row.number),), requeue_after=s.poll_s), None
    if row.start_error is not None or (inst is not None and inst.failure is not None):
        return start_failed(a)  # apply could not start the agent, or the provider says it never can: for good
    if not alive(inst):
        return Step(), _gone(a, now, bound)
    assert inst is not None
    if agent is not None and agent.state == "exited":
        return Step((Terminate(row.number, inst.id),)), exit_end(a, now)
    if agent is not None and agent.state == "failed":
        return Step((Terminate(row.number, inst.id),)), End(row.number, TerminationReason.FAILED,
                                                            f"agent failed: {agent.error}", status=agent)
    noticed = notice(a, now, s)
    if noticed is not None:
        progress = (Progress(row.number, agent),) if agent is not None else ()
        drain = Drain(row.number, notice_at=noticed[0], until=noticed[1])
        return Step(progress + (drain,), requeue_after=s.poll_s), None
    if agent is None:
        if inst.queued is not None:
            return _admission_wait(a, s, bound)
        if (now - boot_start(a, now)).total_seconds() > s.boot_timeout_s:
            return Step((Terminate(row.number, inst.id),)), End(
                row.number, TerminationReason.LOST, f"agent not reachable {s.boot_timeout_s:.0f}s after launch")
        return Step((StartAgent(row.number),) if a.reachable else (), requeue_after=s.poll_s), None
    return Step((Progress(row.number, agent), Heartbeat(row.number)), requeue_after=s.poll_s), None


def _admission_wait(a: AttemptView, s: Settings, bound: AdmissionBound | None) -> tuple[Step, End | None]:
    """An attempt waiting for admission (``Instance.queued``): not booting, so no boot clock yet
    (``admission``, ``boot_start``). It waits while ``bound`` (the job's ``max_wait``) allows;
    past it, it ends as no capacity and its instance goes (a pod and its Kueue Workload): apply
    backs the class off and the job bursts (``decide.owned``)."""
    if bound is None:
        return Step(requeue_after=s.poll_s), None
    if bound.left_s <= 0:
        return Step(terminate_if_alive(a)), End(a.row.number, TerminationReason.NO_CAPACITY, bound.why)
    return Step(requeue_after=min(s.poll_s, bound.left_s)), None


def boot_start(a: AttemptView, now: datetime) -> datetime:
    """When the attempt's boot clock started: the later of the daemon's launch and the provider's
    (``created_at``), which for an instance that waited in its provider's queue is its admission."""
    launched = aware(a.row.launched_at or a.row.requested_at) or now
    created = aware(a.instance.created_at) if a.instance is not None else None
    return max(launched, created) if created is not None and created <= now else launched


def admission(a: AttemptView, want: JobStatus, message: str | None) -> tuple[Action, ...]:
    """The job's word on an attempt waiting in its provider's queue (``Instance.queued``, a Kueue
    LocalQueue): its message says so, with one event when the wait starts; once admitted, the
    message goes. Empty when nothing changes."""
    inst, said = a.instance, (message or "").startswith(ADMISSION)
    if inst is not None and inst.queued is not None and a.agent is None:
        text = f"{ADMISSION}: {inst.queued}"
        if message == text:
            return ()
        return (() if said else (Note("admission", text, attempt=a.row.number),)) + (SetJob(want, text),)
    return (SetJob(want),) if said else ()


def start_failed(a: AttemptView) -> tuple[Step, End]:
    """The agent cannot start on the attempt's instance, for good: the job's volume cannot be
    mounted (the runner said so, or its device never showed up), or the runner raised
    ``PermanentError`` (a workdir that cannot be copied). Apply recorded why as the attempt's
    ``start_error``: say so, stop the instance and end the attempt as failed, so the job's retry
    policy decides what follows. The event is ``volume_failed`` for the volume (its messages start
    with "volume", ``VolumeMountFailed`` and ``Volumes.attach``), ``start_failed`` otherwise. The
    provider's ``Instance.failure`` (an image its host cannot pull) ends it the same way."""
    failure = a.instance.failure if a.instance is not None else None
    why = a.row.start_error or failure or "the agent cannot start"
    kind = "volume_failed" if why.startswith("volume") else "start_failed"
    return Step((Note(kind, why, attempt=a.row.number),) + terminate_if_alive(a)), \
        End(a.row.number, TerminationReason.FAILED, why)


def exit_end(a: AttemptView, now: datetime) -> End:
    agent, number = a.agent, a.row.number
    assert agent is not None
    code = agent.exit_code if agent.exit_code is not None else -1
    if code != 0 and agent.notice_at is not None:
        # It died after its instance's notice (the signal came before its handler was set, or it
        # quits on it): the attempt was preempted; the job did not fail.
        why = agent.notice_reason or "preemption"
        return End(number, TerminationReason.PREEMPTED, f"job exited with code {code} after a {why} notice",
                   lost_work_s=lost_work_s(a, ts(agent.ended_at, now) or now), status=agent)
    reason = TerminationReason.SUCCEEDED if code == 0 else TerminationReason.FAILED
    return End(number, reason, f"job exited with code {code}", exit_code=code, result=agent.result, status=agent)
