"""End to end on AWS (moto, the real adapter, reconciler and SQLite): a spot job with a volume is
interrupted; its second attempt, in the volume's zone, finds on the EBS volume the file its first
attempt wrote there. The instances' side is ``tests/volume_e2e.py`` (the real mount step finds
the volume by its NVMe serial link, ``/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol...``).

Bare Reconciler: the AWS adapter is built on moto with its test endpoints and a fake clock, which
no config file can name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from moto_helpers import REGIONS, interrupt_spot, static_prices
from sqlmodel import select
from volume_e2e import Disks, VolumeMachine, need_e2fsprogs

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.runners.volume_mount import EBS_BY_ID_PREFIX
from gpuorch.store.models import Attempt, Job, JobStatus, TerminationReason
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options

pytestmark = pytest.mark.aws


def test_the_second_attempt_finds_on_the_volume_what_the_first_wrote(moto, session, store, clock,
                                                                       tmp_path: Path) -> None:
    need_e2fsprogs()
    events: list[dict[str, Any]] = []
    disks, machines = Disks(tmp_path / "disks"), {}

    class Aws(AwsProvider):
        def runner(self, instance: Instance) -> Runner:
            if instance.id not in machines:
                machines[instance.id] = VolumeMachine(
                    self, instance, disks, tmp_path / instance.id,
                    lambda vid: f"dev/disk/by-id/{EBS_BY_ID_PREFIX}{vid.replace('-', '')}", events)
            return machines[instance.id]

    provider = Aws(parse_options({"regions": REGIONS}), session=session, prices=static_prices)
    spec = parse_spec({"name": "ft", "run": "python train.py", "resources": {"gpu": "A10G:1"}, "spot_policy": "spot",
                       "volume": {"size": "20GB", "mount": "/data"}, "retry": {"max_preemptions": 2}})
    job = jobs.submit(store, spec, clock.now())
    rec = Reconciler(store, {"aws": provider}, clock=clock)

    def run(passes: int) -> None:
        for _ in range(passes):
            rec.run_pass()
            clock.advance(5)

    run(6)
    [first] = events
    assert first["found"] is None and "is blank: formatting it" in first["mount"]
    interrupt_spot(next(i.region for i in provider.list_managed() if i.id == first["instance"]), first["instance"])
    run(12)
    with store.read() as s:
        j = s.get(Job, job.id)
        rows = sorted(s.exec(select(Attempt).where(Attempt.job_id == job.id)), key=lambda a: a.number)
    assert j is not None and j.status == JobStatus.SUCCEEDED
    assert [a.reason for a in rows] == [TerminationReason.PREEMPTED, TerminationReason.SUCCEEDED]
    second = events[-1]
    assert second["attempt"] == 2 and second["instance"] != first["instance"]
    assert second["zone"] == first["zone"] == j.volume_zone
    assert "has a filesystem: mounting it as it is" in second["mount"]
    assert second["found"] == f"step 300 written by attempt 1 on {first['instance']}\n"
    assert provider.list_volumes() == []
