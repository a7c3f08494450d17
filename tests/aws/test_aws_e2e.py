"""End to end on AWS (moto): the reconciler places a job on EC2, the SSH runner drives a real
sshd standing in for the instance, checkpoints go to S3 (ThreadedMotoServer), a spot
interruption is injected, and the job resumes from S3 in another zone to the same result.

The in-process reconciler runs with a real clock; every wait polls with a generous timeout and
nothing asserts on timing, so a loaded 2-core machine is only slower.

Bare Reconciler: the AWS adapter is built on moto and S3 (ThreadedMotoServer) with a real sshd
standing in for the instance, which no config file can name.
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "s3"))  # the shared moto S3 server

from aws_e2e_harness import FakeImds, FakeInstances
from moto_helpers import REGIONS, static_prices
from moto_s3 import MotoS3
from sshd import SshdUnavailable, find_sshd

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Checkpoint, Job, JobStatus, TerminationReason
from gpuorch.testing.e2e import TINY_MLP, tiny_mlp_reference
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options

pytestmark = pytest.mark.aws

EXAMPLE = TINY_MLP
ENV = {"STEPS": "240", "CKPT_EVERY": "20", "STEP_SLEEP": "0.02", "SEED": "11"}
NOTICE_S = 30.0  # the 2-minute warning, shortened
TIMEOUT_S = 120.0  # per wait: only a stuck test ever reaches it


class World:
    """moto EC2 (in-process) + moto S3 (a server the agents reach) + the fake machines + the daemon."""

    def __init__(self, store: Any, session: Any, tmp_path: Path) -> None:
        self.store = store
        self.s3 = MotoS3()
        self.bucket = self.s3.new_bucket()
        self.imds = FakeImds()
        self.machines = FakeInstances(tmp_path / "machines", lambda r: session.client("ec2", region_name=r), REGIONS,
                                      self.imds, agent_env=self.s3.env)
        options = parse_options({"regions": REGIONS, "ssh_user": getpass.getuser()})
        self.provider = AwsProvider(options, home=tmp_path / "home", session=session, prices=static_prices,
                                    runner_options=self.machines.options)
        self.logs = LogMirror(tmp_path / "logs")
        self.rec = Reconciler(store, {"aws": self.provider}, settings=Settings(poll_s=0.2), logs=self.logs)

    def step(self) -> None:
        self.machines.sync()  # cloud-init: instances launched last pass get their sshd
        self.rec.run_pass()

    def run_until(self, check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.step()
            if check():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; attempts: {self.attempts_of_last()}")

    def attempts_of_last(self) -> list[Attempt]:
        with self.store.read() as s:
            job = s.exec(select(Job).order_by(Job.id.desc())).first()  # type: ignore[union-attr]
            return jobs.attempts_of(s, job.id) if job else []

    def close(self) -> None:
        self.provider.close()
        self.machines.close()
        self.imds.close()
        self.s3.stop()


@pytest.fixture
def world(moto: None, session: Any, store: Any, tmp_path: Path) -> Iterator[World]:
    try:
        find_sshd()
    except SshdUnavailable as e:
        pytest.skip(str(e))
    w = World(store, session, tmp_path)
    yield w
    w.close()


def test_spot_interruptions_relaunch_elsewhere_and_resume_from_s3_with_same_result(
    world: World, tmp_path: Path
) -> None:
    spec = parse_spec({"name": "mlp", "run": f"{sys.executable} train.py", "workdir": str(EXAMPLE), "env": ENV,
                       "resources": {"gpu": "A10G:1"}, "spot_policy": "spot",
                       "checkpoint": {"store": f"s3://{world.bucket}/ckpt", "interval": "1s"}})
    job = jobs.submit(world.store, spec, world.rec.clock.now())

    def attempts() -> list[Attempt]:
        with world.store.read() as s:
            return jobs.attempts_of(s, job.id)

    # Placed on AWS, tagged, driven over SSH; a checkpoint reaches S3.
    world.run_until(lambda: bool(attempts()) and attempts()[-1].last_checkpoint is not None, "a durable checkpoint")
    a1 = attempts()[-1]
    assert a1.provider == "aws" and a1.spot and a1.status == AttemptStatus.RUNNING
    tags = tags_of(world, a1.region, a1.instance_id)
    assert tags["gpuorch:job"] == str(job.id) and tags["gpuorch:attempt"] == "1" and tags["gpuorch:managed"] == "true"
    assert tags["gpuorch:owner"] == world.store.installation_id
    assert s3_keys(world, f"ckpt/{world.store.installation_id}/mlp-{job.id}/")  # namespaced by installation

    # 1. EC2 reclaims the spot instance without warning: relaunch elsewhere, restore from S3.
    world.machines.interrupt(a1.instance_id)
    world.run_until(lambda: len(attempts()) == 2 and attempts()[-1].last_checkpoint is not None,
                    "a relaunch that checkpoints")
    a1, a2 = attempts()
    assert a1.reason == TerminationReason.PREEMPTED and "without notice" in (a1.message or "")
    assert (a2.region, a2.zone) != (a1.region, a1.zone)
    assert a2.status == AttemptStatus.RUNNING and a2.resumed_from is not None  # from S3, not started over

    # 2. The 2-minute warning (IMDSv2 spot/instance-action), then the reclaim at its deadline:
    # the agent checkpoints and hands off, the daemon drains and relaunches before the kill.
    reclaim_at = world.imds.announce(a2.instance_id, NOTICE_S)

    def handed_over() -> bool:
        if time.time() >= reclaim_at and not world.machines.machines[a2.instance_id].gone:
            world.machines.interrupt(a2.instance_id)  # the daemon did not end it first: EC2 does
        return len(attempts()) == 3 and attempts()[1].status == AttemptStatus.ENDED

    world.run_until(handed_over, "the drained attempt to end")
    world.run_until(lambda: job_of(world, job.id).status.terminal, "the job to finish")

    a1, a2, a3 = attempts()
    assert a2.reason == TerminationReason.PREEMPTED and a2.notice_at is not None
    assert a3.predecessor == 2 and a3.zone not in (a1.zone, a2.zone)  # zones that preempted it go last
    assert a3.reason == TerminationReason.SUCCEEDED
    with world.store.read() as s:
        # One final per attempt (a job preempted with notice twice has two); only attempt 2 had a notice.
        finals = s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id, col(Checkpoint.final).is_(True))).all()
    assert [c.attempt for c in finals] == [2] and a3.resumed_from == finals[0].name  # taken on the notice
    assert world.imds.polls.get(a3.instance_id)  # each instance polls its own notice
    done = job_of(world, job.id)
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0 and done.preemptions == 2
    # bitwise: nothing lost, nothing repeated
    assert json.loads(done.result)["final_loss"] == tiny_mlp_reference(tmp_path, ENV)
    assert "resuming from" in world.logs.path(job.id, 3).read_text()
    world.step()
    assert [i for i in world.provider.list_managed() if i.state.alive] == []


def tags_of(world: World, region: str, instance_id: str) -> dict[str, str]:
    d = world.provider.client(region).describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in d.get("Tags", [])}


def s3_keys(world: World, prefix: str) -> list[str]:
    listed = world.s3.client.list_objects_v2(Bucket=world.bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def job_of(world: World, job_id: int) -> Job:
    with world.store.read() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job

