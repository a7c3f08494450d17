"""A job's volume with the FakeProvider, a real SQLite store and a fake clock: created once in the
first attempt's zone, attached to every attempt there, deleted when the job ends.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import pytest
from test_reconciler import Crash, drive, submit

from gpuorch.errors import PermanentError, TransientError
from gpuorch.provider.port import SupportsVolumes
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.apply.volumes import volume_tags
from gpuorch.reconciler.decide.actions import Launch
from gpuorch.reconciler.decide.job import JobView, Settings, decide
from gpuorch.runners.port import VolumeMountFailed
from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, events, job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

VOLUME = {"size": "100GB", "mount": "/data"}


@pytest.fixture
def fake(clock):
    return FakeProvider(clock, script=FakeJobScript(duration_s=300, checkpoint_every_s=60))


@pytest.fixture
def rec(store, fake, clock):
    return Reconciler(store, {"fake": fake}, clock=clock)


def test_the_fake_supports_volumes_and_refuses_cross_zone_attach(fake):
    assert isinstance(fake, SupportsVolumes)
    vol = fake.create_volume(region="r1", zone="r1-b", size_gib=10, tags={"gpuorch:job": "1"})
    assert vol.tags["gpuorch:managed"] == "true" and fake.list_volumes() == [vol]
    from gpuorch.provider.port import LaunchRequest
    from gpuorch.testing.fake_provider import default_offers
    inst = fake.launch(LaunchRequest(job_id=1, attempt=1, offer=default_offers()[0], spot=True))  # r1-a
    with pytest.raises(PermanentError) as e:
        fake.attach_volume(vol.id, inst.id)
    assert e.value.code == "InvalidVolume.ZoneMismatch"


def test_volume_created_once_follows_the_job_after_preemption_and_is_deleted_at_the_end(store, fake, clock, rec):
    job = submit(store, clock, volume=VOLUME)
    drive(rec, clock, 100)
    [a1] = attempts(store, job.id)
    [vol] = fake.list_volumes()
    j = job_row(store, job.id)
    assert (j.volume_id, j.volume_provider, j.volume_zone) == (vol.id, "fake", a1.zone)
    assert vol.zone == a1.zone and vol.size_gib == 100 and vol.attached_to == a1.instance_id
    assert vol.tags == volume_tags(job.id, store.installation_id)
    cfg = fake._agents[a1.instance_id].config
    assert cfg.env["GPUORCH_VOLUME_DIR"] == "/data" and (cfg.volume_id, cfg.volume_dir) == (vol.id, "/data")

    fake.inject_preemption(a1.instance_id, notice_s=120)
    clock.advance(1)
    rec.run_pass()
    a1, a2 = attempts(store, job.id)
    assert a2.zone == a1.zone  # required by the volume, though the zone was just preempted
    drive(rec, clock, 60)
    a1, a2 = attempts(store, job.id)
    assert a1.status == AttemptStatus.ENDED and a2.status == AttemptStatus.RUNNING
    [vol] = fake.list_volumes()
    assert vol.attached_to == a2.instance_id and fake.count("create_volume") == 1
    assert fake._agents[a2.instance_id].config.volume_id == vol.id  # the next attempt mounts it too
    assert ("detach_volume", vol.id, a1.instance_id) in fake.calls

    drive(rec, clock, 400)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
    assert fake.list_volumes() == [] and fake.count("create_volume") == 1


def test_cancel_deletes_the_volume(store, fake, clock, rec):
    from gpuorch.jobs import intent as jobs
    job = submit(store, clock, volume=VOLUME)
    drive(rec, clock, 30)
    assert len(fake.list_volumes()) == 1
    jobs.cancel(store, str(job.id), clock.now())
    rec.run_pass()
    assert job_row(store, job.id).status == JobStatus.CANCELLED
    assert fake.list_volumes() == []


def _restart_and_finish(store, fake, clock, job):
    clock.advance(61)  # the dead daemon's lease expires
    drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d2"), clock, 400)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
    assert fake.list_volumes() == []


def test_crash_between_volume_intent_and_create_converges_to_one_volume(store, fake, clock):
    job = submit(store, clock, volume=VOLUME)
    fake.fail_next("create_volume", Crash())
    with pytest.raises(Crash):
        drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d1"), clock, 30)
    j = job_row(store, job.id)
    assert j.volume_zone is not None and j.volume_id is None and fake.list_volumes() == []
    creates = []
    real = fake.create_volume
    fake.create_volume = lambda **kw: creates.append(kw) or real(**kw)
    _restart_and_finish(store, fake, clock, job)
    assert len(creates) == 1 and creates[0]["zone"] == j.volume_zone


def test_crash_between_volume_create_and_record_finds_it_by_its_tags(store, fake, clock):
    job = submit(store, clock, volume=VOLUME)
    real = fake.create_volume

    def create_then_die(**kw):
        real(**kw)
        raise Crash()

    fake.create_volume = create_then_die
    with pytest.raises(Crash):
        drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d1"), clock, 30)
    [vol] = fake.list_volumes()
    assert job_row(store, job.id).volume_id is None
    fake.create_volume = real
    created_before = fake.count("create_volume")
    clock.advance(61)
    drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d2"), clock, 100)
    assert job_row(store, job.id).volume_id == vol.id and fake.count("create_volume") == created_before
    assert fake.list_volumes()[0].attached_to == attempts(store, job.id)[-1].instance_id
    drive(Reconciler(store, {"fake": fake}, clock=clock, owner="d2"), clock, 400)
    assert fake.list_volumes() == []


def test_sweep_deletes_volumes_no_unfinished_job_owns(store, fake, clock, rec):
    job = submit(store, clock)
    mine = fake.create_volume(region="r1", zone="r1-a", size_gib=1, tags=volume_tags(job.id, store.installation_id))
    gone = fake.create_volume(region="r1", zone="r1-a", size_gib=1, tags=volume_tags(999, store.installation_id))
    theirs = fake.create_volume(region="r1", zone="r1-a", size_gib=1, tags=volume_tags(999, "other-install"))
    rec.run_pass()
    assert {v.id for v in fake.list_volumes()} == {mine.id, theirs.id}
    assert gone.id not in fake.volumes


def test_placement_requires_the_volume_zone(store, fake, clock):
    from test_reconciler import SPEC

    from gpuorch.jobs.spec import parse_spec
    job = submit(store, clock, volume=VOLUME)
    job.volume_zone = "r1-b"
    spec = parse_spec({**SPEC, "volume": VOLUME})
    d = decide(JobView(job, spec, []), clock.now(), fake.offers())
    [launch] = [x for x in d.actions if isinstance(x, Launch)]
    assert {c.offer.zone for c in launch.candidates} == {"r1-b"}
    job.volume_zone = "nowhere"  # no offer there: the job waits queued
    d = decide(JobView(job, spec, []), clock.now(), fake.offers())
    assert not any(isinstance(x, Launch) for x in d.actions)


def test_a_refused_delete_at_the_end_is_retried_by_the_sweep(store, fake, clock, rec):
    job = submit(store, clock, volume=VOLUME)
    fake.fail_next("delete_volume", TransientError("still detaching", code="VolumeInUse"))
    drive(rec, clock, 400, step=5.0)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
    assert fake.count("delete_volume") >= 2 and fake.list_volumes() == []


# -- mounting: the runner never waits; a volume that cannot be mounted ends the attempt ------------

def _mount_looks(fake, instance_id):
    return sum(1 for c in fake.calls if c[:2] == ("runner.mount", instance_id))


def test_a_device_slow_to_show_up_holds_no_pass_and_the_job_starts_on_a_later_pass(store, fake, clock, rec):
    fake.volume_device_delay_s = 30  # under Settings.volume_wait_s
    slow = submit(store, clock, name="slow", volume=VOLUME)
    other = submit(store, clock, name="other")
    rec.run_pass()  # launches both
    [a], [b] = attempts(store, slow.id), attempts(store, other.id)
    rec.run_pass()  # one look at the slow job's device, not there; the other job starts in the same pass
    assert _mount_looks(fake, a.instance_id) == 1
    assert a.instance_id not in fake._agents and b.instance_id in fake._agents
    [a] = attempts(store, slow.id)
    assert a.status == AttemptStatus.LAUNCHED and a.volume_attached_at == clock.now()
    [attached] = events(store, "volume_attached", slow.id)
    assert a.instance_id in attached.message

    looks = []
    while a.instance_id not in fake._agents:  # every pass looks once more, the clock moves on
        clock.advance(5)
        rec.run_pass()
        looks.append(_mount_looks(fake, a.instance_id))
    assert looks == list(range(2, len(looks) + 2))  # one look per pass, never more
    assert (clock.now() - a.volume_attached_at).total_seconds() == 30  # the pass after it showed up
    drive(rec, clock, 400)
    [a] = attempts(store, slow.id)  # the same attempt, never ended
    assert a.reason == TerminationReason.SUCCEEDED and job_row(store, slow.id).status == JobStatus.SUCCEEDED
    assert job_row(store, other.id).status == JobStatus.SUCCEEDED
    assert events(store, "volume_failed", slow.id) == []


def test_a_final_mount_failure_ends_the_attempt_with_an_event_and_the_retry_policy_applies(store, fake, clock, rec):
    job = submit(store, clock, volume=VOLUME, retry={"max_preemptions": 3, "max_failures": 1})
    why = "/dev/nvme1n1 holds data but no filesystem blkid knows: not formatting it; mount it yourself (exit 5)"
    fake.fail_next("runner.mount", VolumeMountFailed("vol-0123456789abcdef0", "/data", why))
    rec.run_pass()
    rec.run_pass()  # the start fails for good: not retried on this instance; apply records why
    rec.run_pass()  # ... and the next pass's decide ends the attempt (and asks for its replacement)
    a1 = attempts(store, job.id)[0]
    expected = f"volume vol-0123456789abcdef0 at /data: {why}"
    assert (a1.status, a1.reason, a1.message) == (AttemptStatus.ENDED, TerminationReason.FAILED, expected)
    assert ("terminate", a1.instance_id) in fake.calls and a1.instance_id not in fake._agents
    [note] = events(store, "volume_failed", job.id)
    assert note.message == expected and note.attempt == 1
    [ended] = events(store, "attempt_ended", job.id)
    assert ended.message == f"failed: {expected}"
    [vol] = fake.list_volumes()
    assert ("detach_volume", vol.id, a1.instance_id) in fake.calls
    assert job_row(store, job.id).failures == 1

    drive(rec, clock, 400)  # retry.max_failures is 1: a new attempt, with the same volume, runs the job
    a1, a2 = attempts(store, job.id)
    assert _mount_looks(fake, a1.instance_id) == 1  # never looped on the failed instance
    assert a2.reason == TerminationReason.SUCCEEDED and fake.count("create_volume") == 1
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED


def test_a_device_that_never_shows_up_fails_the_attempt_volume_wait_s_after_the_attach(store, fake, clock, rec):
    fake.volume_device_delay_s = float("inf")  # not a Nitro type, or the attach is lost
    job = submit(store, clock, volume=VOLUME)  # retry.max_failures 0: the job fails with it
    rec.run_pass()
    rec.run_pass()
    [a] = attempts(store, job.id)
    attached = a.volume_attached_at
    assert attached == clock.now()
    wait = Settings().volume_wait_s
    clock.advance(wait - 5)
    # A restarted daemon (same owner: it keeps its leases) counts from the attach the store
    # recorded, not from its own start.
    rec = Reconciler(store, {"fake": fake}, clock=clock, owner=rec.owner)
    rec.run_pass()
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.LAUNCHED and events(store, "volume_failed", job.id) == []
    clock.advance(5)
    rec.run_pass()  # apply records why the agent cannot start ...
    rec.run_pass()  # ... and the next pass's decide ends the attempt
    [a] = attempts(store, job.id)
    assert (a.status, a.reason) == (AttemptStatus.ENDED, TerminationReason.FAILED)
    assert a.message.startswith(f"volume {job_row(store, job.id).volume_id} at /data: no device yet")
    assert a.message.endswith(f"(still none {wait:.0f}s after the attach; volume_wait_s is {wait:g})")
    assert ("terminate", a.instance_id) in fake.calls
    assert [e.message for e in events(store, "volume_failed", job.id)] == [a.message]
    rec.run_pass()
    j = job_row(store, job.id)
    assert j.status == JobStatus.FAILED and "retry.max_failures is 0" in j.message
    assert fake.list_volumes() == []  # a finished job's volume is deleted


def test_a_volume_the_instance_can_never_attach_ends_the_attempt_with_the_reason(store, fake, clock, rec):
    job = submit(store, clock, volume=VOLUME, retry={"max_preemptions": 3, "max_failures": 0})
    fake.fail_next("attach_volume", PermanentError("providers.fake.volume_type: m1 cannot attach a hd disk",
                                                   code="InvalidVolume.DiskType"))
    drive(rec, clock, 30)
    [a1] = attempts(store, job.id)
    assert a1.reason == TerminationReason.FAILED
    assert a1.message == "volume: providers.fake.volume_type: m1 cannot attach a hd disk"
    assert job_row(store, job.id).status == JobStatus.FAILED


def test_the_jobs_volume_type_reaches_the_create(store, fake, clock, rec):
    job = submit(store, clock, volume={**VOLUME, "type": "pd-ssd"})
    drive(rec, clock, 30)
    [a1] = attempts(store, job.id)
    assert ("create_volume", a1.zone, "pd-ssd") in fake.calls
