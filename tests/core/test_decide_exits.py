"""decide, pure: how an attempt whose job exited ends, with and without a notice before."""

from __future__ import annotations

from datetime import timedelta

from gpuorch.agent.protocol import AgentStatus
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler.decide.actions import End, Launch, SetJob, Terminate
from gpuorch.reconciler.decide.job import AttemptView, JobView, decide
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason
from gpuorch.testing.fake_provider import default_offers

SPEC = parse_spec({"name": "t", "run": "x", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot"})


def view(clock, agent: AgentStatus) -> JobView:
    now = clock.now()
    job = Job(id=1, name="t", spec=SPEC.model_dump_json(), status=JobStatus.RUNNING, created_at=now)
    row = Attempt(job_id=1, number=1, status=AttemptStatus.RUNNING, provider="fake", region="r1", zone="r1-a",
                  instance_type="gpu.a100", spot=True, instance_id="fake-1", requested_at=now, launched_at=now,
                  started_at=now)
    inst = Instance(id="fake-1", provider="fake", region="r1", zone="r1-a", instance_type="gpu.a100", spot=True,
                    state=InstanceState.RUNNING, preemption_deadline=now + timedelta(seconds=60))
    return JobView(job, SPEC, [AttemptView(row, observed=True, instance=inst, agent=agent, reachable=True)])


def test_a_job_killed_by_its_notice_signal_was_preempted_not_failed(clock):
    t = clock.now().timestamp()
    agent = AgentStatus(state="exited", exit_code=138, running_since=t - 30, notice_at=t - 2,
                        notice_reason="preemption", ended_at=t - 1, final_done=True)
    d = decide(view(clock, agent), clock.now(), default_offers())
    [end] = [a for a in d.actions if isinstance(a, End)]
    assert end.reason == TerminationReason.PREEMPTED and "code 138 after a preemption notice" in end.message
    assert end.lost_work_s == 29  # from its start to its exit: it had no checkpoint
    assert any(isinstance(a, Terminate) for a in d.actions)
    [launch] = [a for a in d.actions if isinstance(a, Launch)]
    assert launch.candidates[0].offer.zone != "r1-a"  # a replacement, away from the reclaimed zone


def test_without_a_notice_a_non_zero_exit_is_a_failure(clock):
    agent = AgentStatus(state="exited", exit_code=3, running_since=clock.now().timestamp() - 30)
    d = decide(view(clock, agent), clock.now(), default_offers())
    [end] = [a for a in d.actions if isinstance(a, End)]
    assert end.reason == TerminationReason.FAILED and end.exit_code == 3


def test_a_job_whose_attempt_succeeded_is_never_run_again(clock):
    """A pass recorded the attempt's success, then died before marking the job: the next pass
    marks the job, it does not launch it again."""
    v = view(clock, AgentStatus(state="exited", exit_code=0))
    row = v.attempts[0].row
    row.status, row.reason, row.message = AttemptStatus.ENDED, TerminationReason.SUCCEEDED, "job exited with code 0"
    ended = JobView(v.job, v.spec, [AttemptView(row, observed=True)])
    d = decide(ended, clock.now(), default_offers())
    assert [type(a).__name__ for a in d.actions] == ["SetJob"]
    assert d.actions[0].status == JobStatus.SUCCEEDED and d.actions[0].finished


def draining_with_replacement(clock, agent: AgentStatus, replacement: bool = True) -> JobView:
    """Attempt 1 got a notice and drains; attempt 2, its replacement, is running."""
    v = view(clock, agent)
    first = v.attempts[0]
    first.row.status, first.row.reason = AttemptStatus.DRAINING, TerminationReason.PREEMPTED
    first.row.drain_until = clock.now() + timedelta(seconds=60)
    if not replacement:
        return v
    row = Attempt(job_id=1, number=2, status=AttemptStatus.RUNNING, provider="fake", region="r2", zone="r2-a",
                  instance_type="gpu.a100", spot=True, instance_id="fake-2", requested_at=clock.now(), predecessor=1)
    inst = Instance(id="fake-2", provider="fake", region="r2", zone="r2-a", instance_type="gpu.a100", spot=True,
                    state=InstanceState.RUNNING)
    second = AttemptView(row, observed=True, instance=inst, agent=AgentStatus(state="running"), reachable=True)
    return JobView(v.job, v.spec, [first, second])


def test_a_job_that_finishes_within_its_notice_succeeded_and_its_replacement_is_stopped(clock):
    agent = AgentStatus(state="exited", exit_code=0, notice_at=clock.now().timestamp() - 5, result={"loss": 1.0})
    d = decide(draining_with_replacement(clock, agent), clock.now(), default_offers())
    ends = {a.attempt: a for a in d.actions if isinstance(a, End)}
    assert ends[1].reason == TerminationReason.SUCCEEDED and ends[1].result == {"loss": 1.0}
    assert ends[2].reason == TerminationReason.CANCELLED and "attempt 1 finished the job" in ends[2].message
    assert {a.instance_id for a in d.actions if isinstance(a, Terminate)} == {"fake-1", "fake-2"}
    [job] = [a for a in d.actions if isinstance(a, SetJob)]
    assert job.status == JobStatus.SUCCEEDED and job.finished
    assert not any(isinstance(a, Launch) for a in d.actions)


def test_a_success_recorded_by_a_pass_that_died_still_stops_the_replacement(clock):
    v = draining_with_replacement(clock, AgentStatus(state="exited", exit_code=0))
    first = v.attempts[0].row
    first.status, first.reason = AttemptStatus.ENDED, TerminationReason.SUCCEEDED
    first.message = "job exited with code 0"
    view = JobView(v.job, v.spec, [AttemptView(first, observed=True), v.attempts[1]])
    d = decide(view, clock.now(), default_offers())
    [end] = [a for a in d.actions if isinstance(a, End)]
    assert end.attempt == 2 and end.reason == TerminationReason.CANCELLED
    assert [a.instance_id for a in d.actions if isinstance(a, Terminate)] == ["fake-2"]
    assert any(isinstance(a, SetJob) and a.status == JobStatus.SUCCEEDED for a in d.actions)


def test_a_draining_job_that_exits_non_zero_stays_preempted(clock):
    agent = AgentStatus(state="exited", exit_code=143, notice_at=clock.now().timestamp() - 5, final_done=True)
    d = decide(draining_with_replacement(clock, agent, replacement=False), clock.now(), default_offers())
    [end] = [a for a in d.actions if isinstance(a, End)]
    assert end.attempt == 1 and end.reason == TerminationReason.PREEMPTED
    assert not any(isinstance(a, SetJob) and a.status == JobStatus.SUCCEEDED for a in d.actions)
