"""An ``image:`` job on Vast through the assembled daemon (the config names the ``vast`` provider and
the fake Vast API): the instance is rented with the job's image (the fake records ``image``), and
the job runs under the real agent inside that instance, with no container runtime (the instance
is the container). As in ``tests/harness/test_vast_outbid.py``, the fake rents no machine: each
instance is played by a local instance directory, handed out by the adapter's SSH runner pool, so
the adapter's own ``runner`` (which wraps it) is what the daemon uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vast import FakeVast

from gpuorch.clock import utcnow
from gpuorch.provider.localdir import InstanceDir
from gpuorch.provider.localdir.instances import Meta
from gpuorch.provider.localdir.runner import LocalRunner
from gpuorch.provider.port import Instance, InstanceState, Offer
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.vast, pytest.mark.timeout(300)]
IMAGE = "ghcr.io/acme/qlora-train:1.4"


def test_an_image_job_runs_in_an_instance_rented_with_its_image_under_the_agent(
        tmp_path: Path, fake: FakeVast, monkeypatch: pytest.MonkeyPatch) -> None:
    machines = tmp_path / "machines"
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"vast": {"server_url": fake.url}}}) as d:
        vast = d.adapter("vast")
        assert vast.capabilities.runs_containers
        runners: dict[str, LocalRunner] = {}

        def machine(instance: Instance) -> LocalRunner:
            if instance.id not in runners:  # the container Vast started, as a local instance directory
                now = utcnow()
                offer = Offer(provider="vast", region=instance.region, zone=instance.zone,
                              instance_type=instance.instance_type, gpu="RTX4090", gpu_count=1,
                              gpu_memory_gib=24, price_per_hour=0.5)
                InstanceDir(machines / instance.id).create(Meta(
                    id=instance.id, client_token=fake.instances[int(instance.id)]["label"], tags=instance.tags,
                    offer=offer, spot=instance.spot, state=InstanceState.RUNNING, created_at=now, ready_at=now))
                runners[instance.id] = LocalRunner(machines / instance.id)
            return runners[instance.id]

        monkeypatch.setattr(vast._runners, "get", machine)  # the instance side only; vast.runner wraps it
        job = d.submit({"name": "img", "image": IMAGE, "run": 'echo "attempt $GPUORCH_ATTEMPT" > ran.txt',
                        "resources": {"gpu": "RTX4090:1"}, "spot_policy": "on-demand", "providers": ["vast"]})
        done = d.until_terminal(job, timeout_s=120)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        [a1] = d.attempts(job)
        run = machines / str(a1.instance_id) / "run"
        assert (run / "work" / "ran.txt").read_text() == "attempt 1\n"  # ran in the instance, no runtime
        assert json.loads((run / "agent.json").read_text())["container"] is None
    assert fake.rented_images == [IMAGE]
