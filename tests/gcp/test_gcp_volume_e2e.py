"""End to end on GCP (the fake GCE, the real SDK client, the real reconciler and SQLite): a job
with a volume, preempted; its second attempt finds on the persistent disk the file its first
attempt wrote there. The VMs' side is ``tests/volume_e2e.py`` (the real mount step finds the
disk by its device name, ``/dev/disk/by-id/google-<disk>``).

Bare Reconciler: the GCP adapter is built on the fake GCE (its endpoint and credential) with a
fake clock, which no config file can name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_gce import FakeGce
from sqlmodel import select
from volume_e2e import Disks, VolumeMachine, need_e2fsprogs

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt, Job, JobStatus, TerminationReason
from gpuorch_gcp import GcpProvider
from gpuorch_gcp.config import parse_options

pytestmark = pytest.mark.gcp


def test_the_second_attempt_finds_on_the_disk_what_the_first_wrote(fake: FakeGce, store, tmp_path: Path) -> None:
    need_e2fsprogs()
    events: list[dict[str, Any]] = []
    disks, machines = Disks(tmp_path / "disks"), {}

    class Gcp(GcpProvider):
        def runner(self, instance: Instance) -> Runner:
            if instance.id not in machines:
                machines[instance.id] = VolumeMachine(self, instance, disks, tmp_path / instance.id.replace("/", "_"),
                                                      lambda vid: f"dev/disk/by-id/google-{vid.split('/')[1]}", events)
            return machines[instance.id]

    provider = Gcp(parse_options({"project": fake.project, "zones": ["us-central1-a", "us-central1-b"],
                                  "endpoint": fake.url}), now=fake.now, sleep=lambda s: None)
    clock = FakeClock(fake.now())
    spec = parse_spec({"name": "ft", "run": "python train.py", "resources": {"gpu": "L4:1"}, "spot_policy": "spot",
                       "volume": {"size": "20GB", "mount": "/data"}, "retry": {"max_preemptions": 2}})
    job = jobs.submit(store, spec, clock.now())
    rec = Reconciler(store, {"gcp": provider}, clock=clock)

    def run(seconds: float) -> None:
        for _ in range(int(seconds // 5)):
            rec.run_pass()
            clock.advance(5)
            fake.advance(5)

    run(30)
    [first] = events
    assert first["found"] is None and "is blank: formatting it" in first["mount"]
    zone, name = first["instance"].split("/")
    fake.preempt(zone, name)  # GCE reclaims the spot VM: 30 s notice, then it is deleted
    run(90)
    with store.read() as s:
        j = s.get(Job, job.id)
        rows = sorted(s.exec(select(Attempt).where(Attempt.job_id == job.id)), key=lambda a: a.number)
    assert j is not None and j.status == JobStatus.SUCCEEDED
    assert [a.reason for a in rows] == [TerminationReason.PREEMPTED, TerminationReason.SUCCEEDED]
    second = events[-1]
    assert second["attempt"] == 2 and second["instance"] != first["instance"]
    assert second["zone"] == first["zone"] == j.volume_zone  # the disk's zone
    assert "has a filesystem: mounting it as it is" in second["mount"]  # never formatted twice
    assert second["found"] == f"step 300 written by attempt 1 on {first['instance']}\n"
    assert provider.list_volumes() == [] and not fake.disks  # deleted when the job ended
    provider.close()
