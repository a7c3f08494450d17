"""A job's volume through the assembled daemon: the AWS adapter built from the daemon's config file
(``providers.aws.endpoint_url`` naming moto's server on 127.0.0.1, credentials from boto3's
standard chain) exactly as ``gpuorch daemon`` builds it, metrics wrapper on. A spot job with a
``volume:`` is interrupted; its second attempt lands in the volume's zone and finds on the EBS
volume what the first wrote there; the volume is deleted when the job ends, and nothing is left
billing.

moto's instances run nothing, so the one part replaced after assembly is the instance side: the
adapter's ``runner`` factory hands out ``tests/volume_e2e.py``'s machines (the real mount step
finds the volume by its NVMe serial link, ``/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol...``).
Placement, launch, the volume's create/attach/detach/delete, the wrapper, decide and apply are the
daemon's own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from sqlmodel import select
from volume_e2e import Disks, VolumeMachine, need_e2fsprogs

from gpuorch.provider.port import Instance
from gpuorch.runners.port import Runner
from gpuorch.runners.volume_mount import EBS_BY_ID_PREFIX
from gpuorch.store.models import Event, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "aws"))  # moto's glue, as tests/aws imports it
from moto_helpers import REGIONS, add_dlami, interrupt_spot
from moto_placement import PlacementGroups

pytestmark = [pytest.mark.aws, pytest.mark.timeout(300)]


def test_an_interrupted_spot_job_finds_its_volume_again_under_the_assembled_daemon(
        tmp_path: Path, moto_ec2: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    need_e2fsprogs()
    for region in REGIONS:
        add_dlami(region)  # moto has no Deep Learning AMI; the adapter's default search finds this one
    config = {"providers": {"aws": {"regions": REGIONS, "endpoint_url": moto_ec2.url}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        assert d.metrics is not None and type(d.provider("aws")).__name__ == "InstrumentedProvider"
        aws = d.adapter("aws")
        groups = PlacementGroups()  # an EC2 API moto lacks (the gang sweep lists groups each pass)
        for region in REGIONS:
            groups.attach(region, aws.client(region))
        events: list[dict[str, Any]] = []
        disks, machines = Disks(tmp_path / "disks"), {}

        def machine(instance: Instance) -> Runner:
            if instance.id not in machines:
                machines[instance.id] = VolumeMachine(
                    aws, instance, disks, tmp_path / instance.id,
                    lambda vid: f"dev/disk/by-id/{EBS_BY_ID_PREFIX}{vid.replace('-', '')}", events)
            return machines[instance.id]

        monkeypatch.setattr(aws, "runner", machine)  # the instance side only
        job = d.submit({"name": "ft", "run": "python train.py", "resources": {"gpu": "A10G:1"},
                        "spot_policy": "spot", "volume": {"size": "20GB", "mount": "/data"},
                        "retry": {"max_preemptions": 2}})

        first = d.until(lambda: events[0] if events else None, timeout_s=90,
                        what="the first attempt to mount its volume and write on it")
        assert first["found"] is None and "is blank: formatting it" in first["mount"]
        assert first["env"] == "/data"
        [a1] = d.attempts(job)
        assert a1.instance_id == first["instance"] and a1.spot
        interrupt_spot(a1.region, first["instance"])

        done = d.until_terminal(job, timeout_s=180)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        rows = d.attempts(job)
        assert [a.reason for a in rows] == [TerminationReason.PREEMPTED, TerminationReason.SUCCEEDED]
        second = events[-1]
        assert second["attempt"] == 2 and second["instance"] == rows[1].instance_id != first["instance"]
        assert second["zone"] == first["zone"] == done.volume_zone == rows[1].zone
        assert "has a filesystem: mounting it as it is" in second["mount"]
        assert second["found"] == f"step 300 written by attempt 1 on {first['instance']}\n"

        # The volume is deleted once the job ended; nothing the daemon made is left billing.
        d.until(lambda: aws.list_volumes() == [], timeout_s=60, what="the job's volume to be deleted")
        with d.store.read() as s:
            assert "volume_deleted" in s.exec(select(Event.kind).where(Event.job_id == job)).all()
        assert [i.id for i in aws.list_managed() if i.state.alive] == []
        assert all(a.ended_at is not None for a in rows)
        for region in REGIONS:  # as EC2 itself tells it, past the adapter
            ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_ec2.url)
            states = {i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
            assert states <= {"terminated"} and ec2.describe_volumes()["Volumes"] == [], region

        # The volume's calls went through the daemon's wrapper: one volume, attached to each attempt.
        def calls(method: str) -> float:
            return d.metrics.registry.get_sample_value(
                "gpuorch_provider_calls_total", {"provider": "aws", "method": method}) or 0.0

        assert calls("create_volume") == 1 and calls("attach_volume") >= 2 and calls("delete_volume") >= 1
