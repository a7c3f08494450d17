"""The reconciler with the FakeProvider, a real SQLite store and a fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from gpuorch.errors import TransientError
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import LaunchRequest
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import AttemptStatus, Checkpoint, Event, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {
    "name": "train",
    "run": "python train.py",
    "resources": {"gpu": "A100:80GB:1"},
    "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"},
    "retry": {"max_preemptions": 3, "max_failures": 0},
}


def submit(store, clock, **overrides):
    return jobs.submit(store, parse_spec({**SPEC, **overrides}), clock.now())


def drive(rec, clock, seconds, step=5.0):
    """Run passes while advancing the fake clock."""
    elapsed = 0.0
    while elapsed < seconds:
        rec.run_pass()
        clock.advance(step)
        elapsed += step
    rec.run_pass()


@pytest.fixture
def fake(clock):
    return FakeProvider(clock, script=FakeJobScript(duration_s=300, checkpoint_every_s=60))


@pytest.fixture
def rec(store, fake, clock):
    return Reconciler(store, {"fake": fake}, clock=clock)


def test_launch_run_and_succeed_on_cheapest_offer(store, fake, clock, rec):
    job = submit(store, clock)
    rec.run_pass()
    [a] = attempts(store, job.id)
    assert (a.zone, a.instance_type, a.spot, a.status) == ("r1-a", "gpu.a100", True, AttemptStatus.LAUNCHED)
    inst = fake.get(a.instance_id)
    assert inst.tags["gpuorch:job"] == str(job.id) and inst.tags["gpuorch:attempt"] == "1"
    assert inst.tags["gpuorch:owner"] == store.installation_id
    drive(rec, clock, 100)
    assert job_row(store, job.id).status == JobStatus.RUNNING
    drive(rec, clock, 300)
    j = job_row(store, job.id)
    assert j.status == JobStatus.SUCCEEDED and j.exit_code == 0 and j.finished_at is not None
    [a] = attempts(store, job.id)
    assert a.reason == TerminationReason.SUCCEEDED and a.last_checkpoint is not None
    assert fake.live_instances() == []  # the instance stops billing at once


def test_preemption_notice_final_checkpoint_relaunch_elsewhere_and_resume(store, fake, clock, rec):
    job = submit(store, clock)
    drive(rec, clock, 150)  # checkpoints at 60 and 120 s of work
    [a1] = attempts(store, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=120)
    clock.advance(1)
    rec.run_pass()  # notices, drains attempt 1 and requests attempt 2 in the same pass
    a1, a2 = attempts(store, job.id)
    assert a1.status == AttemptStatus.DRAINING and a1.reason == TerminationReason.PREEMPTED
    assert a2.status == AttemptStatus.LAUNCHED and a2.zone != a1.zone and a2.predecessor == 1
    notice_launch_delay = (a2.requested_at - a1.notice_at).total_seconds()
    assert notice_launch_delay <= 1.0
    drive(rec, clock, 30)
    a1, a2 = attempts(store, job.id)
    assert a1.status == AttemptStatus.ENDED  # terminated once its final checkpoint was uploaded
    with store.read() as s:
        final = s.exec(select(Checkpoint).where(Checkpoint.final == True)).one()  # noqa: E712
    assert final.attempt == 1
    assert a2.resumed_from == final.name  # the replacement waited for the final checkpoint
    assert a1.lost_work_s is not None and a1.lost_work_s < 30
    drive(rec, clock, 400)
    j = job_row(store, job.id)
    assert j.status == JobStatus.SUCCEEDED and j.preemptions == 1
    assert fake.live_instances() == []


def test_preemption_without_notice_relaunches_from_last_periodic_checkpoint(store, fake, clock, rec):
    job = submit(store, clock)
    drive(rec, clock, 150)
    [a1] = attempts(store, job.id)
    fake.vanish(a1.instance_id)
    drive(rec, clock, 20)
    a1, a2 = attempts(store, job.id)[:2]
    assert a1.reason == TerminationReason.LOST and a1.lost_work_s > 0
    assert a2.resumed_from == a1.last_checkpoint
    drive(rec, clock, 400)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED


def test_cancel_terminates_the_instance(store, fake, clock, rec):
    job = submit(store, clock)
    drive(rec, clock, 30)
    jobs.cancel(store, str(job.id), clock.now())
    rec.run_pass()
    assert job_row(store, job.id).status == JobStatus.CANCELLED
    [a] = attempts(store, job.id)
    assert a.reason == TerminationReason.CANCELLED
    assert fake.live_instances() == []


def test_failure_exhausts_retry_budget(store, fake, clock, rec):
    fake.scripts["train"] = FakeJobScript(duration_s=50, exit_code=3)
    job = submit(store, clock, retry={"max_failures": 1})
    drive(rec, clock, 200)
    j = job_row(store, job.id)
    assert j.status == JobStatus.FAILED and j.exit_code == 3 and j.failures == 2
    assert [a.reason for a in attempts(store, job.id)] == [TerminationReason.FAILED] * 2
    assert fake.live_instances() == []


def test_no_capacity_tries_next_offer_and_backs_off(store, fake, clock, rec):
    fake.set_capacity("r1-a", "gpu.a100", spot=True, available=False)
    job = submit(store, clock)
    rec.run_pass()
    a1, a2 = attempts(store, job.id)
    assert a1.reason == TerminationReason.NO_CAPACITY and a1.instance_id is None
    assert (a2.zone, a2.spot, a2.status) == ("r1-b", True, AttemptStatus.LAUNCHED)
    assert len(fake.live_instances()) == 1


class Crash(BaseException):
    """Stands in for SIGKILL at one line of the daemon."""


def test_restart_between_launch_requested_and_recorded_makes_no_duplicate(store, fake, clock):
    job = submit(store, clock)
    real_launch = fake.launch

    def launch_then_die(req):
        real_launch(req)
        raise Crash()

    fake.launch = launch_then_die
    with pytest.raises(Crash):
        Reconciler(store, {"fake": fake}, clock=clock, owner="d1").run_pass()
    fake.launch = real_launch
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.REQUESTED and a.instance_id is None
    clock.advance(61)  # the dead daemon's lease expires
    restarted = Reconciler(store, {"fake": fake}, clock=clock, owner="d2")
    drive(restarted, clock, 400)
    assert len([c for c in fake.calls if c[0] == "launch"]) >= 1
    assert len(fake.list_managed()) == 1  # one instance ever, adopted by the restarted daemon
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED


def test_restart_before_launch_call_launches_once(store, fake, clock):
    job = submit(store, clock)
    fake.fail_next("launch", Crash())
    with pytest.raises(Crash):
        Reconciler(store, {"fake": fake}, clock=clock, owner="d1").run_pass()
    assert fake.list_managed() == []
    clock.advance(61)
    drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d2"), clock, 400)
    assert len(fake.list_managed()) == 1
    assert [a.number for a in attempts(store, job.id)] == [1]
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED


def test_live_lease_blocks_a_second_daemon(store, fake, clock):
    job = submit(store, clock)
    Reconciler(store, {"fake": fake}, clock=clock, owner="d1").run_pass()
    other = Reconciler(store, {"fake": fake}, clock=clock, owner="d2")
    clock.advance(10)
    other.run_pass()
    assert job_row(store, job.id).lease_owner == "d1"
    assert len(fake.list_managed()) == 1


def test_transient_launch_error_retries_same_attempt(store, fake, clock, rec):
    job = submit(store, clock)
    fake.fail_next("launch", TransientError("throttled", code="RequestLimitExceeded"))
    rec.run_pass()
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.REQUESTED
    clock.advance(5)
    rec.run_pass()
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.LAUNCHED


def test_orphan_sweep_terminates_instances_no_attempt_owns(store, fake, clock, rec):
    offer = fake.offers()[0]
    stray = fake.launch(LaunchRequest(job_id=999, attempt=1, offer=offer, spot=False, owner=store.installation_id))
    foreign = fake.launch(LaunchRequest(job_id=998, attempt=1, offer=offer, spot=False, owner="someone-else"))
    rec.run_pass()
    assert fake.get(stray.id).state.value == "terminated"
    assert fake.get(foreign.id).state.alive  # another installation's instance is not ours to kill
    with store.read() as s:
        assert s.exec(select(Event).where(Event.kind == "orphan_terminated")).one().job_id == 999


def test_max_preemptions_fails_the_job(store, fake, clock, rec):
    job = submit(store, clock, retry={"max_preemptions": 1})
    for _ in range(2):
        drive(rec, clock, 20)
        live = [a for a in attempts(store, job.id) if a.status == AttemptStatus.RUNNING]
        fake.vanish(live[-1].instance_id)
    drive(rec, clock, 20)
    j = job_row(store, job.id)
    assert j.status == JobStatus.FAILED and "max_preemptions" in j.message
    assert fake.live_instances() == []


def test_instance_table_mirrors_what_the_provider_reports(store, fake, clock, rec):
    from gpuorch.store.models import Instance as InstanceRow

    job = submit(store, clock)
    drive(rec, clock, 400)
    with store.read() as s:
        [row] = s.exec(select(InstanceRow)).all()
    [a] = attempts(store, job.id)
    assert (row.instance_id, row.job_id, row.attempt, row.zone) == (a.instance_id, job.id, 1, a.zone)
    assert row.state in ("terminated", "terminating") and row.terminated_at is not None


def test_a_status_listing_a_checkpoint_twice_records_it_once(store, fake, clock, rec):
    from gpuorch.testing.fake_provider import FakeRunner

    job = submit(store, clock)
    drive(rec, clock, 130)
    real = FakeRunner.status

    def twice(self):
        st = real(self)
        if st is not None and st.uploaded:
            st.uploaded = st.uploaded + [st.uploaded[-1]]
        return st

    FakeRunner.status = twice
    try:
        drive(rec, clock, 100)
    finally:
        FakeRunner.status = real
    with store.read() as s:
        names = [c.name for c in s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id))]
    assert len(names) == len(set(names)) >= 3
    assert job_row(store, job.id).status == JobStatus.RUNNING


def test_one_jobs_trouble_does_not_stall_the_others(store, fake, clock, rec, monkeypatch):
    broken = submit(store, clock, name="broken")
    fine = submit(store, clock, name="fine")
    real = rec._view

    def view(job, observed, ok):
        if job.id == broken.id:
            raise RuntimeError("a bug")
        return real(job, observed, ok)

    monkeypatch.setattr(rec, "_view", view)
    drive(rec, clock, 400)
    assert job_row(store, fine.id).status == JobStatus.SUCCEEDED


def test_an_instance_without_a_runner_yet_is_unreachable_not_a_failed_pass(store, fake, clock, rec, caplog):
    """Cloud adapters have no runner for a running instance without an address yet (its public IP
    comes later): the job waits, its pass does not fail, and it starts once the runner exists."""
    from gpuorch.runners.port import RunnerUnavailable

    real_runner = fake.runner
    addressed = {"yes": False}

    def runner(instance):
        if not addressed["yes"]:
            raise RunnerUnavailable(f"{instance.id} has no address yet")
        return real_runner(instance)

    fake.runner = runner
    job = submit(store, clock)
    with caplog.at_level("ERROR", logger="gpuorch.reconciler"):
        drive(rec, clock, 60)
    assert not [r for r in caplog.records if "reconcile failed" in r.getMessage()]
    assert job_row(store, job.id).status == JobStatus.STARTING
    addressed["yes"] = True
    drive(rec, clock, 400)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
