"""The reconciler with the AWS adapter (moto) and a volume job: one gp3 volume, created in the
instance's zone, attached before the agent starts (whose config names it, for the SSH runner to
mount: tests/ssh/test_ssh_volume_mount.py), deleted when the job ends.

moto's instances run nothing, so the agent is a scripted runner: it records what EC2 says about
the volume when it is started and then reports the job exited 0. Everything else is the real
adapter, the real reconciler, a real SQLite store and a fake clock.

Bare Reconciler: the AWS adapter is built on moto with a scripted agent and a fake clock, which no
config file can name.
"""

from __future__ import annotations

from typing import Any

import pytest
from moto_helpers import REGIONS, static_prices

from gpuorch.agent.protocol import AgentConfig
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.store.models import Job, JobStatus
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options
from gpuorch_aws.requests import is_root_volume
from tests.kit.agents import Agent

pytestmark = pytest.mark.aws


class ScriptedRunner(Agent):
    """An agent that exits 0 as soon as it is started; records the volumes EC2 shows attached."""

    def __init__(self, provider: AwsProvider, instance: Instance, seen: list[Any]) -> None:
        super().__init__()
        self.provider, self.instance, self.seen = provider, instance, seen

    def start(self, config: AgentConfig, workdir: Any = None) -> None:
        ec2 = self.provider.client(self.instance.region)
        attached = {"Name": "attachment.instance-id", "Values": [self.instance.id]}
        vols = ec2.describe_volumes(Filters=[attached])["Volumes"]
        self.seen.append((self.instance, config.env.get("GPUORCH_VOLUME_DIR"),
                          [v for v in vols if not is_root_volume(v)], (config.volume_id, config.volume_dir)))
        self.started, self.done = config, True


def test_a_volume_job_gets_one_gp3_volume_in_its_instance_zone_deleted_at_the_end(moto, session, store, clock) -> None:
    seen: list[Any] = []
    runners: dict[str, ScriptedRunner] = {}

    class Aws(AwsProvider):
        def runner(self, instance: Instance) -> Runner:
            return runners.setdefault(instance.id, ScriptedRunner(self, instance, seen))

    provider = Aws(parse_options({"regions": REGIONS}), session=session, prices=static_prices)
    spec = parse_spec({"name": "vol", "run": "true", "spot_policy": "on-demand",
                       "volume": {"size": "20GB", "mount": "/data"}})
    job = jobs.submit(store, spec, clock.now())
    rec = Reconciler(store, {"aws": provider}, clock=clock)
    for _ in range(6):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        j = s.get(Job, job.id)
    assert j.status == JobStatus.SUCCEEDED
    [(inst, mount, [vol], to_mount)] = seen  # started once, with one volume besides the root one
    assert mount == "/data" and to_mount == (j.volume_id, "/data")  # what the SSH runner mounts first
    assert vol["AvailabilityZone"] == inst.zone == j.volume_zone and vol["VolumeId"] == j.volume_id
    assert vol["VolumeType"] == "gp3" and vol["Size"] == 20
    tags = {t["Key"]: t["Value"] for t in vol["Tags"]}
    assert tags["gpuorch:job"] == str(job.id) and tags["gpuorch:owner"] == store.installation_id
    assert provider.list_volumes() == []  # deleted at the end
