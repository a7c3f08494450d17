"""A job's volume with the FakeProvider, a real SQLite store and a fake clock: created once in the
first attempt's zone, attached to every attempt there, deleted when the job ends."""

from __future__ import annotations

import pytest

from gpuorch.errors import PermanentError
from gpuorch.fake import FakeJobScript, FakeProvider
from gpuorch.provider import SupportsVolumes
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.actions import Launch
from gpuorch.reconciler.decide import JobView, decide
from gpuorch.reconciler.volumes import volume_tags
from gpuorch.store.models import AttemptStatus, JobStatus

from test_reconciler import Crash, attempts, drive, job_row, submit

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
    from gpuorch.fake import default_offers
    from gpuorch.provider import LaunchRequest
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
    from gpuorch import jobs
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
    from gpuorch.spec import parse_spec
    from test_reconciler import SPEC
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
    fake.fail_next("delete_volume", PermanentError("still detaching", code="VolumeInUse"))
    drive(rec, clock, 400, step=5.0)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
    assert fake.count("delete_volume") >= 2 and fake.list_volumes() == []
