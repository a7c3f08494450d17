"""The provider and runner contract suites against the Kubernetes provider (lightkube against kmock,
pods run by the fake kubelet as local processes; the agent in each pod driven through pods/exec)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod

from gpuorch.errors import NoCapacityError
from gpuorch.provider.port import LaunchRequest, Offer, Provider
from gpuorch.runners.port import Runner
from gpuorch.testing import ProviderContract, RunnerContract, wait_until
from gpuorch_kubernetes import KubernetesProvider

pytestmark = pytest.mark.kubernetes


@pytest.fixture
def k8s(tmp_path: Path):
    with cluster(tmp_path) as c:
        yield c
    assert c.kubelet.errors == []


class TestKubernetesProviderContract(ProviderContract):
    boot_timeout_s = 20.0
    end_timeout_s = 30.0
    notice_s = 1.0
    clock_skew_s = 2.0  # the API's times are whole seconds
    missing_instance_id = "kmock:gpuorch-missing-1-1"

    @pytest.fixture
    def provider(self, k8s, tmp_path: Path):
        p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
        yield p
        p.close()

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        from lightkube.resources.core_v1 import Node

        client = self._cluster.client()
        for node in client.list(Node):
            client.patch(Node, node.metadata.name, {"spec": {"unschedulable": True}})

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        from lightkube.resources.core_v1 import Pod

        self._cluster.client().create(Pod.from_dict({"metadata": {"name": "someone-else"}, "spec": {
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"]}]}}))
        return "kmock:someone-else"

    @pytest.fixture(autouse=True)
    def _keep(self, k8s) -> None:
        self._cluster = k8s


def test_offers_are_the_nodes_capacity_and_a_launch_finds_out_what_is_free(k8s, tmp_path: Path) -> None:
    """Offers list what the nodes have, held or not (a full cluster is still an owned option to
    wait for); a launch that finds too few GPUs free creates nothing and says no capacity."""
    p = KubernetesProvider.from_config(k8s.options(context={"price_per_gpu_hour": 1.5}), tmp_path)
    offers = {o.instance_type: o for o in p.offers()}
    assert set(offers) == {"A100-80GBx1", "A100-80GBx2", "A100-80GBx4", "T4x1"}
    assert offers["A100-80GBx4"].price_per_hour == 6.0 and offers["A100-80GBx4"].gpu_count == 4
    assert offers["A100-80GBx1"].gpu_memory_gib == 80 and offers["A100-80GBx1"].region == "kmock"
    inst = p.launch(LaunchRequest(job_id=1, attempt=1, offer=offers["A100-80GBx2"], spot=False, owner="o1"))
    wait_until(lambda: p.get(inst.id).state.value == "running", what="the pod to run")
    assert {o.instance_type for o in p.offers()} == set(offers)  # 2 of 4 held: the capacity is the same
    assert {o.instance_type for o in KubernetesProvider.catalog_offers({}, tmp_path)} == \
        set(offers)  # what submit's fit check and plan read, without the cluster
    with pytest.raises(NoCapacityError, match="no Ready node has 4 A100-80GB free"):
        p.launch(LaunchRequest(job_id=2, attempt=1, offer=offers["A100-80GBx4"], spot=False, owner="o1"))
    assert not list(k8s.client().list(Pod, labels={"gpuorch.dev/job": "2"}))  # nothing created
    p.terminate(inst.id)
    p.close()


class TestPodRunnerContract(RunnerContract):
    timeout_s = 60.0
    poll_s = 0.2

    @pytest.fixture
    def runner(self, k8s, tmp_path: Path):
        p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
        offer = next(o for o in p.offers() if o.instance_type == "T4x1")
        inst = p.launch(LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False, owner="o1"))
        wait_until(lambda: p.get(inst.id).state.value == "running", timeout_s=30, what="the pod to run")
        yield p.runner(inst)
        p.terminate(inst.id)
        p.close()

    @pytest.fixture
    def unreachable(self, k8s, tmp_path: Path) -> Runner:
        from gpuorch_kubernetes.runner import PodRunner

        p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
        return PodRunner(p.clusters["kmock"].client, "default", "no-such-pod", "python3")


_ = datetime  # (kept for hooks that compare times)
