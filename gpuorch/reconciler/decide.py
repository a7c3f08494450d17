"""The pure heart of the reconciler: from one job's desired and observed state to actions.

No I/O and no clock reads: everything arrives in a ``JobView``. Each call is level-triggered:
it looks at the state as it is now, so running it twice, or after a crash at any point of the
previous pass, leads to the same place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuorch.agent.protocol import AgentStatus
from gpuorch.money.caps import Gate
from gpuorch.placement import Candidate, candidates
from gpuorch.provider.port import Instance, InstanceState, Offer
from gpuorch.policy.recovery import DEFAULT_STRATEGY, RecoveryContext, get_strategy
from gpuorch.jobs.spec import JobSpec
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason
from gpuorch.reconciler.actions import (
    Adopt,
    Decision,
    Drain,
    End,
    Heartbeat,
    Launch,
    Note,
    Progress,
    Relaunch,
    SetJob,
    StartAgent,
    Terminate,
)
from gpuorch.reconciler.deadline import deadline_launch, deadline_move
from gpuorch.reconciler.gates import gate_launch, stop_running


@dataclass(frozen=True)
class Settings:
    poll_s: float = 2.0  # how often a running attempt is looked at
    boot_timeout_s: float = 900.0  # an instance whose agent cannot be reached this long is lost
    no_offer_retry_s: float = 30.0
    default_notice_s: float = 30.0
    launch_fanout: int = 5  # candidates tried in one pass when offers have no capacity
    avoid_preempted_zone_s: float = 3600.0  # after a preemption, prefer other zones this long
    max_launch_retries: int = 5  # transient failures of one attempt's launch before it moves on
    recovery_strategy: str = DEFAULT_STRATEGY  # for jobs whose spec names none (gpuorch.policy.recovery)
    heartbeat_timeout_s: float | None = None  # the agents' dead-man switch (None: off)
    max_lifetime_s: float | None = None  # LaunchRequest.max_lifetime_s: the cloud-side backstop
    volume_wait_s: float = 60.0  # a job volume's device must show up this long after its attach


@dataclass(frozen=True)
class AttemptView:
    row: Attempt
    observed: bool  # False: the provider could not be listed this pass; conclude nothing
    instance: Instance | None = None  # None: the provider does not report it
    agent: AgentStatus | None = None
    reachable: bool = False  # the runner answered (even if the agent has not started yet)


@dataclass(frozen=True)
class JobView:
    job: Job
    spec: JobSpec
    attempts: Sequence[AttemptView]  # ordered by number
    gate: Gate | None = None  # caps and sweep limits (gpuorch.money.caps); None: none apply


def _ts(epoch: float | None, tz_like: datetime) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz_like.tzinfo) if epoch is not None else None


def lost_work_s(a: AttemptView, stopped_at: datetime) -> float:
    """Work thrown away: from the newer of this attempt's last durable checkpoint and the start of
    its job (a restored checkpoint's time is the predecessor's, and the gap between attempts is
    downtime, not work) to ``stopped_at``. 0 when the job never ran."""
    agent, row = a.agent, a.row
    if agent is not None and agent.running_since is not None:
        start, ckpt = _ts(agent.running_since, stopped_at), _ts(agent.last_checkpoint_at, stopped_at)
    elif row.started_at is not None:  # no word from the agent: what the daemon saw of it
        start, ckpt = row.started_at, row.last_checkpoint_at
    else:
        return 0.0
    since = max(start, ckpt) if ckpt is not None else start  # type: ignore[type-var]
    return max(0.0, (stopped_at - since).total_seconds())  # type: ignore[operator]


def _stopped(inst: Instance | None, now: datetime) -> datetime:
    """When the instance stopped: the provider's word, else now (the first time it was seen gone)."""
    return inst.ended_at if inst is not None and inst.ended_at is not None and inst.ended_at <= now else now


def _notice(a: AttemptView, now: datetime, s: Settings) -> tuple[datetime, datetime] | None:
    """(notice time, kill deadline) if the cloud or the agent has announced a preemption."""
    inst, agent = a.instance, a.agent
    deadline = inst.preemption_deadline if inst else None
    seen = now
    if agent and agent.notice_at is not None:
        seen = min(seen, _ts(agent.notice_at, now))  # type: ignore[type-var]
        deadline = deadline or _ts(agent.notice_deadline, now)
    if deadline is None and not (agent and agent.notice_at is not None):
        return None
    return seen, deadline or seen + timedelta(seconds=s.default_notice_s)


def _alive(inst: Instance | None) -> bool:
    return inst is not None and inst.state.alive


def _decide_draining(a: AttemptView, now: datetime, d: Decision, s: Settings) -> None:
    if not a.observed:
        d.soon(s.poll_s)
        return
    if a.agent is not None:
        d.add(Progress(a.row.number, a.agent))
        if a.agent.state == "exited" and a.agent.exit_code == 0:  # it finished within its notice
            if _alive(a.instance):
                d.add(Terminate(a.row.number, a.instance.id))  # type: ignore[union-attr]
            d.add(_exit_end(a, now))
            return
    final_done = a.agent is not None and a.agent.final_done
    until = a.row.drain_until
    if _alive(a.instance) and not final_done and (until is None or now < until):
        d.soon(s.poll_s)
        return
    if _alive(a.instance):
        d.add(Terminate(a.row.number, a.instance.id))  # type: ignore[union-attr]
    stopped = min(now, until, _stopped(a.instance, now)) if until else _stopped(a.instance, now)
    reason = a.row.reason or TerminationReason.PREEMPTED  # a clean stop drains too (StopCleanly)
    message = "preempted after notice" if reason == TerminationReason.PREEMPTED else (a.row.message or "stopped")
    d.add(End(a.row.number, reason, message, lost_work_s=lost_work_s(a, stopped), status=a.agent))


def _end_of_live(a: AttemptView, now: datetime, d: Decision, s: Settings) -> End | None:
    """Observe the job's current attempt; return its End when it is over."""
    row, inst, agent = a.row, a.instance, a.agent
    if row.status == AttemptStatus.REQUESTED:
        if inst is not None:
            d.add(Adopt(row.number, inst))
            d.soon(0)
        else:
            d.add(Relaunch(row.number))
            d.soon(s.poll_s)
        return None
    if not _alive(inst):
        if agent is not None and agent.state == "exited":
            return _exit_end(a, now)
        stopped = _stopped(inst, now)
        if inst is not None and inst.state == InstanceState.PREEMPTED:
            how = "after a notice the daemon missed" if agent is not None and agent.notice_at else "without notice"
            return End(row.number, TerminationReason.PREEMPTED, f"preempted {how} ({inst.state_reason or 'no reason given'})",
                       lost_work_s=lost_work_s(a, stopped), status=agent)
        what = "disappeared" if inst is None else f"is {inst.state.value}" + (
            f" ({inst.state_reason})" if inst.state_reason else "")
        return End(row.number, TerminationReason.LOST, f"instance {row.instance_id} {what}",
                   lost_work_s=lost_work_s(a, stopped), status=agent)
    assert inst is not None
    if agent is not None and agent.state == "exited":
        d.add(Terminate(row.number, inst.id))
        return _exit_end(a, now)
    if agent is not None and agent.state == "failed":
        d.add(Terminate(row.number, inst.id))
        return End(row.number, TerminationReason.FAILED, f"agent failed: {agent.error}", status=agent)
    notice = _notice(a, now, s)
    if notice is not None:
        if agent is not None:
            d.add(Progress(row.number, agent))
        d.add(Drain(row.number, notice_at=notice[0], until=notice[1]))
        d.soon(s.poll_s)
        return None
    if agent is None:
        launched = row.launched_at or row.requested_at or now
        if (now - launched).total_seconds() > s.boot_timeout_s:
            d.add(Terminate(row.number, inst.id))
            return End(row.number, TerminationReason.LOST, f"agent not reachable {s.boot_timeout_s:.0f}s after launch")
        if a.reachable:
            d.add(StartAgent(row.number))
        d.soon(s.poll_s)
        return None
    d.add(Progress(row.number, agent))
    d.add(Heartbeat(row.number))
    d.soon(s.poll_s)
    return None


def volume_failed(a: AttemptView, why: str) -> Decision:
    """The job's volume cannot be mounted on the attempt's instance (the runner said so for good,
    or its device never showed up): say so, stop the instance and end the attempt as failed, so the
    job's retry policy decides what follows (next pass). ``why`` names the volume and the path."""
    d = Decision()
    d.add(Note("volume_failed", why, attempt=a.row.number))
    if _alive(a.instance):
        d.add(Terminate(a.row.number, a.instance.id))  # type: ignore[union-attr]
    d.add(End(a.row.number, TerminationReason.FAILED, why))
    return d


def _exit_end(a: AttemptView, now: datetime) -> End:
    agent, number = a.agent, a.row.number
    assert agent is not None
    code = agent.exit_code if agent.exit_code is not None else -1
    if code != 0 and agent.notice_at is not None:
        # It died after its instance's notice (the signal came before its handler was set, or it
        # quits on it): the attempt was preempted; the job did not fail.
        why = agent.notice_reason or "preemption"
        return End(number, TerminationReason.PREEMPTED, f"job exited with code {code} after a {why} notice",
                   lost_work_s=lost_work_s(a, _ts(agent.ended_at, now) or now), status=agent)
    reason = TerminationReason.SUCCEEDED if code == 0 else TerminationReason.FAILED
    return End(number, reason, f"job exited with code {code}", exit_code=code, result=agent.result, status=agent)


def recovery_context(view: JobView, now: datetime, s: Settings, preempting: AttemptView | None) -> RecoveryContext:
    """The job's recent preemptions, for the recovery strategy: the newest one's region, and every
    market that preempted or lost the job within ``avoid_preempted_zone_s``."""
    hit = [a.row for a in view.attempts
           if a.row.reason in (TerminationReason.PREEMPTED, TerminationReason.LOST) or a.row.status == AttemptStatus.DRAINING]
    if preempting is not None and all(r.number != preempting.row.number for r in hit):
        hit.append(preempting.row)  # noticed this pass: not yet recorded as draining
    window = s.avoid_preempted_zone_s
    recent = frozenset((r.provider, r.zone, r.spot) for r in hit
                       if (when := r.notice_at or r.ended_at) is None or (now - when).total_seconds() < window)
    last = max(hit, key=lambda r: r.number, default=None)
    return RecoveryContext(preempted_region=(last.provider, last.region) if last else None,
                           preempted_spot=last.spot if last else None, recent=recent, avoid_s=s.avoid_preempted_zone_s)


def _ranked(view: JobView, now: datetime, offers: Sequence[Offer], avoid: Callable[[Candidate], bool] | None,
            s: Settings, preempting: AttemptView | None) -> list[Candidate]:
    """Candidates in the order the job's recovery strategy (or the daemon's) wants them tried.

    A job's volume pins it to the volume's zone (see volumes.py): placement requires that zone.
    """
    strategy = get_strategy(view.spec.recovery.strategy if view.spec.recovery else s.recovery_strategy)
    ranked = candidates(view.spec, offers, avoid=avoid, volume_zone=view.job.volume_zone)
    return strategy.rank(ranked, recovery_context(view, now, s, preempting))


def decide(view: JobView, now: datetime, offers: Sequence[Offer], *, avoid: Callable[[Candidate], bool] | None = None,
           settings: Settings | None = None) -> Decision:
    s = settings or Settings()
    job, d = view.job, Decision()
    for a in view.attempts:
        if a.row.status == AttemptStatus.DRAINING:
            _decide_draining(a, now, d, s)

    current = view.attempts[-1] if view.attempts and view.attempts[-1].row.status.live else None
    # A draining attempt finished the job (this pass, or a pass that died before marking the job):
    # its replacement is not needed.
    done = next((x for x in d.actions if isinstance(x, End) and x.reason == TerminationReason.SUCCEEDED), None)
    won = next((a.row for a in view.attempts if a.row.reason == TerminationReason.SUCCEEDED), None)
    if done is not None or (won is not None and current is not None):
        by = done.attempt if done is not None else won.number  # type: ignore[union-attr]
        if current is not None and not current.observed:  # stop it once we can see its instance
            d.soon(s.poll_s)
            return d
        if current is not None:
            if _alive(current.instance):
                d.add(Terminate(current.row.number, current.instance.id))  # type: ignore[union-attr]
            d.add(End(current.row.number, TerminationReason.CANCELLED,
                      f"not needed: attempt {by} finished the job during its notice", status=current.agent))
        d.add(SetJob(JobStatus.SUCCEEDED, done.message if done is not None else (won.message or "succeeded"),  # type: ignore[union-attr]
                     finished=True))
        return d
    preemptions, failures = job.preemptions, job.failures
    drained: AttemptView | None = None  # got a notice this pass
    preempted: AttemptView | None = None  # got a notice or was reclaimed this pass
    if current is not None:
        if not current.observed:
            d.soon(s.poll_s)
            return d
        if job.cancel_requested:
            if _alive(current.instance):
                d.add(Terminate(current.row.number, current.instance.id))  # type: ignore[union-attr]
            d.add(End(current.row.number, TerminationReason.CANCELLED, "cancelled by user", status=current.agent))
            d.add(SetJob(JobStatus.CANCELLED, "cancelled by user", finished=True))
            return d
        end = _end_of_live(current, now, d, s)
        if end is None and not any(isinstance(x, Drain) for x in d.actions):
            if stop_running(view, current, now, d, s) or deadline_move(
                    view, current, now, d, s, lambda: _ranked(view, now, offers, avoid, s, None)):
                return d
            running = current.agent is not None and current.agent.state not in ("starting",)
            want = JobStatus.RUNNING if running else (
                JobStatus.RECOVERING if preemptions and job.status == JobStatus.RECOVERING else JobStatus.STARTING)
            if job.status != want:
                d.add(SetJob(want))
            return d
        if end is None:  # a notice: the replacement is requested now, not after the kill
            drained = preempted = current
            preemptions += 1
        else:
            d.add(end)
            if end.reason == TerminationReason.SUCCEEDED:
                d.add(SetJob(JobStatus.SUCCEEDED, end.message, finished=True))
                return d
            if end.reason.counts_as == "preemption":
                preemptions += 1
                preempted = current
            elif end.reason.counts_as == "failure":
                failures += 1

    if job.status.terminal:
        return d
    won = next((a.row for a in view.attempts if a.row.reason == TerminationReason.SUCCEEDED), None)
    if won is not None:  # recorded by a pass that died before it could mark the job: never run it again
        d.add(SetJob(JobStatus.SUCCEEDED, won.message or "succeeded", finished=True))
        return d
    if job.cancel_requested:
        d.add(SetJob(JobStatus.CANCELLED, "cancelled by user", finished=True))
        return d
    if failures > view.spec.retry.max_failures:
        d.add(SetJob(JobStatus.FAILED, f"failed {failures} time(s); retry.max_failures is {view.spec.retry.max_failures}",
                     finished=True))
        return d
    if preemptions > view.spec.retry.max_preemptions:
        d.add(SetJob(JobStatus.FAILED, f"preempted {preemptions} time(s); retry.max_preemptions is "
                     f"{view.spec.retry.max_preemptions}", finished=True))
        return d
    if job.not_before is not None and now < job.not_before and drained is None:
        d.soon((job.not_before - now).total_seconds())
        return d
    ranked = gate_launch(view, _ranked(view, now, offers, avoid, s, preempted), now, d, s)  # type: ignore[assignment]
    if ranked is None or (ranked := deadline_launch(view, ranked, now, d, s)) is None:
        return d
    if not ranked:
        d.add(SetJob(JobStatus.QUEUED, "no offer fits the job right now (all filtered, backed off or without capacity)",
                     not_before=now + timedelta(seconds=s.no_offer_retry_s)))
        d.soon(s.no_offer_retry_s)
        return d
    predecessor, deadline = None, None
    if drained is not None:
        predecessor, deadline = drained.row.number, next(x.until for x in d.actions if isinstance(x, Drain))
    else:  # noticed in an earlier pass (a restarted daemon, a launch that found no capacity): the
        # replacement still waits for that attempt's final checkpoint, or its deadline
        draining = [a.row for a in view.attempts if a.row.status == AttemptStatus.DRAINING]
        if draining:
            predecessor, deadline = draining[-1].number, draining[-1].drain_until
    d.add(Launch(tuple(ranked[: s.launch_fanout]), predecessor=predecessor, predecessor_deadline=deadline))
    d.soon(s.poll_s)
    return d
