"""Vast volumes as job volumes given at launch: the launch-volume contract on the fake Vast API
(the official ``vastai`` client), what is Vast's own (the volume decides the machine), and a
``volume:`` job through the assembled daemon: it writes on its volume, is outbid, and the next
instance, on the volume's machine, reads what the first wrote; the volume is deleted when the job
ends. The instance side is played (``tests.kit.volume_agents``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_vast import FakeVast

from gpuorch.errors import NoCapacityError
from gpuorch.provider.port import Instance, LaunchRequest, Provider, VolumeSpec
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.launch_volume_contract import LaunchVolumeContract
from gpuorch_vast.provider import VastProvider
from tests.kit.volume_agents import VolumeAgent

pytestmark = [pytest.mark.vast, pytest.mark.timeout(300)]


class TestVastLaunchVolumeContract(LaunchVolumeContract):
    missing_volume_id = "6999999"

    @pytest.fixture
    def provider(self, fake: FakeVast, vast: VastProvider) -> VastProvider:
        self.fake = fake
        return vast

    def write(self, provider: Provider, instance: Instance, path: str, data: bytes) -> None:
        self.fake.write(instance.id, path, data)

    def read(self, provider: Provider, instance: Instance, path: str) -> bytes | None:
        return self.fake.read(instance.id, path)


def test_a_volume_ties_the_job_to_its_machine(fake: FakeVast, vast: VastProvider) -> None:
    offer = next(o for o in vast.offers() if o.instance_type.endswith("x1") and o.region == "US")
    tags = {"gpuorch:managed": "true", "gpuorch:job": "4", "gpuorch:owner": "abc"}
    vol = vast.create_launch_volume(offer=offer, size_gib=20, tags=tags)
    [row] = fake.volumes.values()
    assert (row["name"], row["disk_space"]) == ("gpuorch-abc-j4", 20) and vol.zone == f"machine-{row['machine_id']}"
    inst = vast.launch(LaunchRequest(job_id=4, attempt=1, offer=offer, spot=False, owner="abc",
                                     volumes=(VolumeSpec(volume_id=vol.id, mount_path="/data"),)))
    assert fake.instances[int(inst.id)]["machine_id"] == row["machine_id"]
    assert fake.instances[int(inst.id)]["_volume"] == {"volume_id": int(vol.id), "mount_path": "/data",
                                                       "create_new": False}
    with pytest.raises(NoCapacityError):  # its machine is rented (by attempt 1): nowhere else will do
        vast.launch(LaunchRequest(job_id=4, attempt=2, offer=offer, spot=False, owner="abc",
                                  volumes=(VolumeSpec(volume_id=vol.id, mount_path="/data"),)))


def test_an_outbid_volume_job_reads_its_data_on_the_next_instance(tmp_path: Path, fake: FakeVast,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"providers": {"vast": {"server_url": fake.url}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        agents: dict[str, VolumeAgent] = {}
        monkeypatch.setattr(d.adapter("vast"), "runner",
                            lambda inst: agents.setdefault(inst.id, VolumeAgent(inst.id, fake.read, fake.write)))
        job = d.submit({"name": "lora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                        "providers": ["vast"], "spot_policy": "spot", "retry": {"max_preemptions": 2},
                        "volume": {"size": "20GB", "mount": "/data"}})
        first = d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                        what="the first instance's agent to start")
        assert first.found is None and first.mounted is None
        [vol] = fake.volumes.values()
        machine = fake.instances[int(first.instance_id)]["machine_id"]
        assert vol["machine_id"] == machine
        fake.outbid(first.instance_id)

        second = d.until(lambda: next((a for i, a in agents.items() if a.started and i != first.instance_id), None),
                         timeout_s=60, what="a second instance's agent to start")
        assert second.found == b"step 300 written by attempt 1\n"
        assert fake.instances[int(second.instance_id)]["machine_id"] == machine
        assert d.attempts(job)[0].reason == TerminationReason.PREEMPTED
        second.done = True
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
        d.until(lambda: not fake.volumes, timeout_s=60, what="the job's volume to be deleted")
        assert not fake.instances
