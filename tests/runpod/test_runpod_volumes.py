"""RunPod network volumes as job volumes given at launch: the launch-volume contract on the fake
GraphQL API, what is RunPod's own (Secure Cloud, the volume's data center, its mount path), and a
``volume:`` job through the assembled daemon: it writes on its volume, its interruptible pod is
reclaimed, the next pod (in the volume's data center) reads what the first wrote, and the volume is
deleted when the job ends. The pod side is played (``tests.kit.volume_agents``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runpod import KEY, FakeRunpod

from gpuorch.errors import PermanentError
from gpuorch.money.storage import periods
from gpuorch.provider.port import Instance, Offer, Provider
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.launch_volume_contract import LaunchVolumeContract
from gpuorch_runpod.config import parse_options
from gpuorch_runpod.provider import RunpodProvider
from tests.kit.volume_agents import VolumeAgent

pytestmark = [pytest.mark.runpod, pytest.mark.timeout(300)]
DC = "EU-RO-1"


class TestRunpodLaunchVolumeContract(LaunchVolumeContract):
    missing_volume_id = "nv0000000"

    @pytest.fixture
    def provider(self, fake: FakeRunpod, tmp_path: Path):
        self.fake = fake
        p = RunpodProvider(parse_options({"api_url": fake.url, "retry_max_s": 5, "volume_data_center": DC}), KEY,
                           home=tmp_path / "home", sleep=lambda s: None)
        yield p
        p.close()

    def offer(self, provider: Provider) -> Offer:
        return min((o for o in provider.offers() if o.region == "secure"), key=lambda o: o.price_per_hour)

    def write(self, provider: Provider, instance: Instance, path: str, data: bytes) -> None:
        self.fake.write(instance.id, path, data)

    def read(self, provider: Provider, instance: Instance, path: str) -> bytes | None:
        return self.fake.read(instance.id, path)


def test_a_volume_is_made_on_secure_cloud_in_a_named_data_center(fake: FakeRunpod, rp: RunpodProvider,
                                                                  tmp_path: Path) -> None:
    tags = {"gpuorch:managed": "true", "gpuorch:job": "3", "gpuorch:owner": "abc"}
    community = next(o for o in rp.offers() if o.region == "community")
    assert not rp.can_carry_volume(community)  # placement keeps a volume job off community hosts
    with pytest.raises(PermanentError) as e:
        rp.create_launch_volume(offer=community, size_gib=10, tags=tags)
    assert e.value.code == "InvalidVolume.Cloud"
    secure = next(o for o in rp.offers() if o.region == "secure")
    with pytest.raises(PermanentError) as e:  # no data center configured: named in the message, nothing made
        rp.create_launch_volume(offer=secure, size_gib=10, tags=tags)
    assert e.value.code == "InvalidVolume.DataCenter" and "volume_data_center" in str(e.value) and not fake.volumes
    pinned = RunpodProvider(parse_options({"api_url": fake.url, "volume_data_center": DC}), KEY, home=tmp_path / "h2",
                            sleep=lambda s: None)
    vol = pinned.create_launch_volume(offer=secure, size_gib=10.2, tags=tags)
    assert fake.volumes[vol.id].view() == {"id": vol.id, "name": "gpuorch-abc-j3", "size": 11, "dataCenterId": DC}
    pinned.close()


def test_a_reclaimed_volume_job_finds_its_data_on_the_next_pod(tmp_path: Path, fake: FakeRunpod,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Both clouds offered: the cheaper community pods cannot carry a network volume, so placement passes them over.
    config = {"providers": {"runpod": {"api_url": fake.url, "volume_data_center": DC}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        agents: dict[str, VolumeAgent] = {}
        monkeypatch.setattr(d.adapter("runpod"), "runner",
                            lambda inst: agents.setdefault(inst.id, VolumeAgent(inst.id, fake.read, fake.write)))
        job = d.submit({"name": "qlora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                        "providers": ["runpod"], "spot_policy": "spot", "retry": {"max_preemptions": 2},
                        "volume": {"size": "20GB", "mount": "/workspace/data"}})
        first = d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                        what="the first pod's agent to start")
        assert first.found is None and first.mounted is None
        [vol] = fake.volumes.values()
        pod = fake.pods[first.instance_id].body
        assert (pod["networkVolumeId"], pod["volumeMountPath"], pod["dataCenterId"]) == (vol.id, "/workspace/data", DC)
        assert pod["cloudType"] == "SECURE" and [a.region for a in d.attempts(job)] == ["secure"]
        fake.reclaim(first.instance_id)

        second = d.until(lambda: next((a for i, a in agents.items() if a.started and i != first.instance_id), None),
                         timeout_s=60, what="a second pod's agent to start")
        assert second.found == b"step 300 written by attempt 1\n"
        assert d.attempts(job)[0].reason == TerminationReason.PREEMPTED
        second.done = True
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
        d.until(lambda: not fake.volumes, timeout_s=60, what="the job's network volume to be deleted")
        assert not fake.pods
        with d.store.read() as s:  # its storage billed from its making to its deletion (gpuorch.money.storage)
            [billed] = periods(s, [job])
        assert (billed.provider, billed.size_gib, billed.rate) == ("runpod", vol.size, 0.07) and billed.end is not None


def test_doctor_says_volumes_are_given_at_launch(rp: RunpodProvider) -> None:
    from gpuorch.doctor.providers import capabilities

    assert "volumes (given at launch)" in capabilities(rp)


def test_submit_refuses_a_disk_type_or_a_size_runpod_cannot_make() -> None:
    from gpuorch.errors import UserInputError
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.jobs.submitcheck import volume_scope
    from gpuorch.registry import volume_size_ranges, volume_types, with_volumes

    config: dict[str, dict] = {"runpod": {}}

    def scope(volume: dict) -> JobSpec:
        spec = JobSpec.model_validate({"name": "v", "run": "x", "providers": ["runpod"], "volume": volume})
        return volume_scope(spec, ["runpod"], with_volumes(config), "job.yaml", sizes=volume_size_ranges(config),
                            types=volume_types(config))

    assert scope({"size": "100GB", "mount": "/data"}).providers == ["runpod"]
    with pytest.raises(UserInputError, match=r"^job.yaml: volume.type: 'gp3' is not a disk type"):
        scope({"size": "100GB", "mount": "/data", "type": "gp3"})
    with pytest.raises(UserInputError, match=r"^job.yaml: volume.size: 5000 GiB is outside .*runpod 1 to 4000 GiB"):
        scope({"size": "5000GB", "mount": "/data"})
