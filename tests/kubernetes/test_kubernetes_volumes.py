"""Job volumes on Kubernetes (PersistentVolumeClaims given at launch): the launch volume contract
against kmock and the fake kubelet (one cluster for the module; the fake kubelet keeps a claim's
files in a directory, ``gpuorch.testing.fake_storage``), and what the claim and pod look like."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_harness import Cluster, cluster
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from gpuorch.errors import PermanentError, UserInputError
from gpuorch.provider.port import Instance, LaunchRequest, Offer, Provider, VolumeSpec
from gpuorch.testing.fake_storage import claim_dir, mounts
from gpuorch.testing.launch_volume_contract import LaunchVolumeContract
from gpuorch_kubernetes import KubernetesProvider

pytestmark = pytest.mark.kubernetes


@pytest.fixture(scope="module")
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("volumes")) as c:
        yield c
    assert c.kubelet.errors == []


def _on_claim(k8s: Cluster, instance: Instance, path: str) -> Path:
    """Where ``path`` of the pod's filesystem is, through the claim mounted above it."""
    pod = k8s.client().get(Pod, instance.id.split(":", 1)[1], namespace="default").to_dict()
    for claim, mount in mounts(pod):
        if path.startswith(mount.rstrip("/") + "/"):
            return claim_dir(k8s.kubelet.root, "default", claim) / path[len(mount.rstrip("/")) + 1:]
    raise AssertionError(f"{path} is on no claim of pod {instance.id}")


class TestKubernetesLaunchVolumeContract(LaunchVolumeContract):
    missing_volume_id = "kmock:gpuorch-nobody-j0"
    timeout_s = 30.0

    @pytest.fixture
    def provider(self, k8s: Cluster, tmp_path: Path) -> Iterator[KubernetesProvider]:
        self._k8s = k8s
        p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
        yield p
        p.close()

    def offer(self, provider: Provider) -> Offer:
        return next(o for o in provider.offers() if o.instance_type == "A100-80GBx1")

    def write(self, provider: Provider, instance: Instance, path: str, data: bytes) -> None:
        target = _on_claim(self._k8s, instance, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def read(self, provider: Provider, instance: Instance, path: str) -> bytes | None:
        target = _on_claim(self._k8s, instance, path)
        return target.read_bytes() if target.exists() else None


def test_a_claim_is_labelled_sized_and_mounted_at_the_mount_path(k8s: Cluster, tmp_path: Path) -> None:
    p = KubernetesProvider.from_config(k8s.options(context={"storage_class": "fast-ssd"}), tmp_path / "home")
    offer = next(o for o in p.offers() if o.instance_type == "T4x1")
    tags = {"gpuorch:managed": "true", "gpuorch:job": "77", "gpuorch:owner": "o1"}
    vol = p.create_launch_volume(offer=offer, size_gib=9.5, tags=tags)
    assert vol.id == "kmock:gpuorch-o1-j77" and vol.size_gib == 10 and vol.tags == tags
    claim = k8s.client().get(PersistentVolumeClaim, "gpuorch-o1-j77", namespace="default")
    assert claim.spec.storageClassName == "fast-ssd" and claim.spec.accessModes == ["ReadWriteOnce"]
    assert claim.metadata.labels["gpuorch.dev/job"] == "77" and "gpuorch.dev/attempt" not in claim.metadata.labels
    inst = p.launch(LaunchRequest(job_id=77, attempt=1, offer=offer, spot=False, owner="o1",
                                  volumes=(VolumeSpec(volume_id=vol.id, mount_path="/data/x"),)))
    pod = k8s.client().get(Pod, inst.id.split(":", 1)[1], namespace="default").to_dict()
    assert mounts(pod) == [("gpuorch-o1-j77", "/data/x")]
    assert [v.attached_to for v in p.list_launch_volumes() if v.id == vol.id] == [inst.id]
    with pytest.raises(PermanentError, match="not a claim of"):
        p.launch(LaunchRequest(job_id=78, attempt=1, offer=offer, spot=False, owner="o1",
                               volumes=(VolumeSpec(volume_id="elsewhere:gpuorch-o1-j77", mount_path="/d"),)))
    p.terminate(inst.id)
    p.close()


def test_a_bad_storage_class_is_refused_naming_the_option(k8s: Cluster, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"providers\.kubernetes\.contexts\.0\.storage_class: 'Fast SSD'"):
        KubernetesProvider.from_config(k8s.options(context={"storage_class": "Fast SSD"}), tmp_path)
