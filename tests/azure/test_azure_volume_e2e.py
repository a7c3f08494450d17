"""End to end on Azure (the fake ARM over TLS, the real SDK client, the real reconciler and
SQLite): a zonal job with a volume, evicted; its second attempt finds on the managed disk the
file its first attempt wrote there. The VMs' side is ``tests/volume_e2e.py`` (the real mount
step finds the disk by its LUN, ``/dev/disk/azure/scsi1/lun<N>``).

Bare Reconciler: the Azure adapter is built on the fake ARM (its TLS endpoint and credential) with
a fake clock, which no config file can name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from azure_helpers import StaticToken, options, zonal_offers
from fake_arm import FakeArm
from sqlmodel import select
from volume_e2e import Disks, VolumeMachine, need_e2fsprogs

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.runners.volume_mount import AZURE_LUN
from gpuorch.store.models import Attempt, Job, JobStatus, TerminationReason
from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options

pytestmark = pytest.mark.azure


def test_the_second_attempt_finds_on_the_disk_what_the_first_wrote(arm: FakeArm, store, tmp_path: Path) -> None:
    need_e2fsprogs()
    events: list[dict[str, Any]] = []
    disks, machines = Disks(tmp_path / "disks"), {}

    class Azure(AzureProvider):
        def runner(self, instance: Instance) -> Runner:
            if instance.id not in machines:
                machines[instance.id] = VolumeMachine(self, instance, disks, tmp_path / instance.id, lambda vid:
                                                      f"dev/disk/azure/scsi1/lun{AZURE_LUN}", events)
            return machines[instance.id]

    provider = Azure(parse_options(options(arm)), home=tmp_path / "home", credential=StaticToken(arm.token),
                     sleep=lambda s: None, now=arm.now, monotonic=lambda: arm.clock, offers=zonal_offers(("1", "2")))
    clock = FakeClock(arm.now())
    spec = parse_spec({"name": "ft", "run": "python train.py", "resources": {"gpu": "T4:1"}, "spot_policy": "spot",
                       "volume": {"size": "20GB", "mount": "/data"}, "retry": {"max_preemptions": 2}})
    job = jobs.submit(store, spec, clock.now())
    rec = Reconciler(store, {"azure": provider}, clock=clock)

    def run(seconds: float) -> None:
        for _ in range(int(seconds // 5)):
            rec.run_pass()
            clock.advance(5)
            arm.advance(5)

    run(30)
    [first] = events
    assert first["found"] is None and "is blank: formatting it" in first["mount"]
    arm.evict(first["instance"], notice_s=30)  # Azure evicts the spot VM (policy Delete): it goes, the disk stays
    run(120)
    with store.read() as s:
        j = s.get(Job, job.id)
        rows = sorted(s.exec(select(Attempt).where(Attempt.job_id == job.id)), key=lambda a: a.number)
    assert j is not None and j.status == JobStatus.SUCCEEDED
    assert [a.reason for a in rows] == [TerminationReason.PREEMPTED, TerminationReason.SUCCEEDED]
    second = events[-1]
    assert second["attempt"] == 2 and second["instance"] != first["instance"]
    assert second["zone"] == first["zone"] == j.volume_zone  # the zonal disk's zone
    assert "has a filesystem: mounting it as it is" in second["mount"]  # never formatted twice
    assert second["found"] == f"step 300 written by attempt 1 on {first['instance']}\n"
    assert provider.list_volumes() == [] and not arm.disks  # deleted when the job ended
    provider.close()
