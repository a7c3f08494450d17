"""Lambda persistent filesystems as job volumes given at launch: the launch-volume contract on
the fake Lambda API (real httpx client), and what is Lambda's own: the launch names the
filesystem and links the job's mount path to its NFS mount at boot."""

from __future__ import annotations

import pytest
import yaml
from fake_lambda import FakeLambda

from gpuorch.errors import PermanentError
from gpuorch.provider.port import Instance, LaunchRequest, Provider, VolumeSpec
from gpuorch.testing.launch_volume_contract import LaunchVolumeContract
from gpuorch_lambda import LambdaProvider

pytestmark = pytest.mark.lambdalabs


class TestLambdaLaunchVolumeContract(LaunchVolumeContract):
    missing_volume_id = "0123456789abcdef0123456789abcdef"

    @pytest.fixture
    def provider(self, make_provider, fake: FakeLambda) -> LambdaProvider:
        self.fake = fake
        return make_provider()

    def advance(self, provider: Provider, seconds: float) -> None:
        self.fake.advance(seconds)

    def write(self, provider: Provider, instance: Instance, path: str, data: bytes) -> None:
        self.fake.write(instance.id, path, data)

    def read(self, provider: Provider, instance: Instance, path: str) -> bytes | None:
        return self.fake.read(instance.id, path)


def test_the_launch_names_the_filesystem_and_links_the_mount_path_at_boot(make_provider, fake: FakeLambda) -> None:
    p = make_provider()
    offer = next(o for o in p.offers() if o.region == "us-east-1")
    tags = {"gpuorch:managed": "true", "gpuorch:job": "5", "gpuorch:owner": "abc123"}
    vol = p.create_launch_volume(offer=offer, size_gib=20, tags=tags)
    assert fake.filesystems[vol.id].name == "gpuorch-abc123-j5"
    p.launch(LaunchRequest(job_id=5, attempt=1, offer=offer, spot=False, owner="abc123",
                           volumes=(VolumeSpec(volume_id=vol.id, mount_path="/mnt/data"),)))
    body = fake.launches[-1]
    assert body["file_system_names"] == ["gpuorch-abc123-j5"]
    boot = yaml.safe_load(body["user_data"].removeprefix("#cloud-config\n"))["bootcmd"]
    assert ["ln", "-sfn", "/lambda/nfs/gpuorch-abc123-j5", "/mnt/data"] in boot

    other = next(o for o in p.offers() if o.region != "us-east-1")
    with pytest.raises(PermanentError) as e:  # a filesystem lives in one region
        p.launch(LaunchRequest(job_id=5, attempt=2, offer=other, spot=False, owner="abc123",
                               volumes=(VolumeSpec(volume_id=vol.id, mount_path="/mnt/data"),)))
    assert e.value.code == "InvalidVolume.ZoneMismatch"
