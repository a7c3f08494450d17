"""Kubernetes gangs (``nodes: N``): the gang contract against kmock and the fake kubelet (a
cluster per test), plus what only Kubernetes has: the headless Service and its DNS name as
``MASTER_ADDR``, the room check for every pod at once, and a gang pod the scheduler cannot place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_harness import Cluster, cluster
from lightkube.resources.core_v1 import Node, Pod, Service

from gpuorch.errors import NoCapacityError
from gpuorch.provider.port import Instance, InstanceState, LaunchRequest, Offer, Provider
from gpuorch.testing import wait_until
from gpuorch.testing.fake_kubelet import FakeNode
from gpuorch.testing.gang_contract import GangContract
from gpuorch_kubernetes import KubernetesProvider

pytestmark = pytest.mark.kubernetes

GPUS = 16
NODES = (FakeNode("gpu-big", gpus=GPUS),)


@pytest.fixture
def k8s(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster per test (0.3 s): one shared by the module kept every earlier test's pods and
    tombstones, which each kubelet sync and listing then read: the module's last tests ran 5-10x
    slower than alone."""
    with cluster(tmp_path / "cluster", NODES) as c:
        yield c
    assert c.kubelet.errors == []


def _pod(k8s: Cluster, instance_id: str) -> Pod:
    return k8s.client().get(Pod, instance_id.split(":", 1)[1], namespace="default")


def _phase(pod: Pod) -> str | None:
    return pod.status.phase if pod.status else None


def _gpu_pods_running(k8s: Cluster) -> list[Pod]:
    return [p for p in k8s.client().list(Pod, namespace="default")
            if p.spec.nodeName and _phase(p) not in ("Succeeded", "Failed")]


class TestKubernetesGangContract(GangContract):
    end_timeout_s = 30.0

    @pytest.fixture
    def provider(self, k8s: Cluster, tmp_path: Path) -> Iterator[KubernetesProvider]:
        self._k8s, self._blockers = k8s, []
        p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
        yield p
        client = k8s.client()
        for name in self._blockers:
            client.delete(Pod, name, grace_period=0)
        p.close()

    def refuse_node(self, provider: Provider, offer: Offer, rank: int) -> None:
        """Room for ``rank`` pods only: a pod of someone else's holds the rest of the node."""
        k8s = self._k8s
        wait_until(lambda: not _gpu_pods_running(k8s), timeout_s=30, what="earlier tests' pods to end")
        name = f"blocker-{len(self._blockers)}"
        k8s.client().create(Pod.from_dict({"metadata": {"name": name}, "spec": {"containers": [{
            "name": "c", "image": "busybox", "command": ["sleep", "60"],
            "resources": {"limits": {"nvidia.com/gpu": str(GPUS - rank * offer.gpu_count)}}}]}}))
        self._blockers.append(name)
        wait_until(lambda: _phase(_pod(k8s, f"kmock:{name}")) == "Running", timeout_s=20,
                   what="the blocker to run")

    def end_node(self, provider: Provider, node: Instance) -> None:
        self._k8s.client().delete(Pod, node.id.split(":", 1)[1], grace_period=0)

    def notice_node(self, provider: Provider, node: Instance, notice_s: float) -> None:
        """A deletion with a grace of ``notice_s``, while an agent runs in the pod (so that the
        pod's bootstrap stays for the grace instead of ending at once)."""
        k8s, name = self._k8s, node.id.split(":", 1)[1]
        wait_until(lambda: k8s.kubelet.sandbox("default", name), timeout_s=20, what="the pod to run")
        run = k8s.kubelet.sandbox("default", name) / "run"  # type: ignore[operator]
        run.mkdir(exist_ok=True)
        (run / "agent.pyz").write_text("import pathlib, time\npathlib.Path('up').touch()\ntime.sleep(300)\n")
        (run / "agent.json").write_text("{}")
        wait_until(lambda: (run.parent / "up").exists(), timeout_s=20, what="the stand-in agent to start")
        k8s.client().delete(Pod, name, grace_period=int(notice_s))

    def private_address(self, provider: Provider, node: Instance) -> str:
        """The pod's DNS name under its headless Service, as CoreDNS serves it (here: fake_dns)."""
        pod = _pod(self._k8s, node.id)
        name = f"{pod.spec.hostname}.{pod.spec.subdomain}.{pod.metadata.namespace}.svc"
        # the record appears once the kubelet has run the pod (its IP): right after the launch here
        wait_until(lambda: self._k8s.kubelet.resolve(name) == "127.0.0.1", timeout_s=20,
                   what=f"{name} to resolve to the pod's IP")
        return name


@pytest.fixture
def provider(k8s: Cluster, tmp_path: Path) -> Iterator[KubernetesProvider]:
    p = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
    yield p
    p.close()


def _offer(p: KubernetesProvider) -> Offer:
    return next(o for o in p.offers() if o.instance_type == "A100-80GBx1")


def test_a_gang_has_a_headless_service_selecting_its_pods_under_the_tokens_name(
        k8s: Cluster, provider: KubernetesProvider) -> None:
    request = LaunchRequest(job_id=41, attempt=1, offer=_offer(provider), spot=False, owner="o1", nodes=2)
    gang = provider.launch(request)
    svc = k8s.client().get(Service, request.client_token, namespace="default")
    assert svc.spec.clusterIP == "None" and svc.spec.publishNotReadyAddresses
    assert svc.metadata.labels["gpuorch.dev/job"] == "41" and svc.metadata.labels["gpuorch.dev/managed"] == "true"
    names = sorted(p.metadata.name for p in k8s.client().list(Pod, namespace="default", labels=svc.spec.selector))
    assert names == [request.client_token, f"{request.client_token}-n1"]
    wait_until(lambda: provider.get(gang.id).state == InstanceState.RUNNING, timeout_s=30, what="the gang to run")
    master = f"{request.client_token}.{request.client_token}.default.svc"
    assert k8s.kubelet.resolve(master) == k8s.kubelet.resolve(master + ".cluster.local") == "127.0.0.1"
    assert k8s.kubelet.resolve(f"nobody.{request.client_token}.default.svc") is None
    provider.terminate(gang.id)
    wait_until(lambda: not [s for s in k8s.client().list(Service, namespace="default")
                            if s.metadata.name == request.client_token], timeout_s=20, what="the Service deleted")


def test_a_gang_without_room_for_every_pod_creates_nothing(k8s: Cluster, provider: KubernetesProvider) -> None:
    offer = next(o for o in provider.offers() if o.instance_type == "A100-80GBx8")
    request = LaunchRequest(job_id=42, attempt=1, offer=offer, spot=False, owner="o1", nodes=3)
    with pytest.raises(NoCapacityError, match="free for each of 3 pods of the gang"):
        provider.launch(request)
    assert not [p for p in k8s.client().list(Pod, namespace="default", labels={"gpuorch.dev/job": "42"})]
    assert not [s for s in k8s.client().list(Service, namespace="default", labels={"gpuorch.dev/job": "42"})]


def test_a_gang_pod_left_unschedulable_ends_the_gang(k8s: Cluster, provider: KubernetesProvider) -> None:
    """A pod of the gang that the scheduler cannot place (the node was cordoned after the room
    check) ends the gang after ``gang_unschedulable_s``: every pod goes, the attempt relaunches."""
    provider.gang_unschedulable_s = 0.0
    request = LaunchRequest(job_id=43, attempt=1, offer=_offer(provider), spot=False, owner="o1", nodes=2)
    client, cl = k8s.client(), provider.clusters["kmock"]
    create = cl.create_pod

    def cordon_before_node_1(manifest: dict) -> dict | None:
        if manifest["metadata"]["name"].endswith("-n1"):
            wait_until(lambda: _pod(k8s, f"kmock:{request.client_token}").spec.nodeName, timeout_s=20,
                       what="node 0 bound")
            client.patch(Node, "gpu-big", {"spec": {"unschedulable": True}})
        return create(manifest)

    cl.create_pod = cordon_before_node_1  # type: ignore[method-assign]
    try:
        gang = provider.launch(request)
        ended = wait_until(lambda: next((g for g in [provider.get(gang.id)] if not g.state.alive), None),
                           timeout_s=30, what="the gang to end")
    finally:
        client.patch(Node, "gpu-big", {"spec": {"unschedulable": False}})
    assert ended.state == InstanceState.PREEMPTED and "unschedulable" in (ended.state_reason or "")
    wait_until(lambda: not [n for n in provider._nodes_of(gang) if n.state.alive], timeout_s=30,
               what="every pod of the gang to end")


def test_the_sweep_deletes_a_service_left_without_pods_by_a_crash(k8s: Cluster, provider: KubernetesProvider) -> None:
    """A crash between the Service and node 0 leaves an empty Service: once it has stood empty
    for the grace, a listing deletes it; the Service of a live gang stays."""
    live = provider.launch(LaunchRequest(job_id=44, attempt=1, offer=_offer(provider), spot=False, owner="o1",
                                         nodes=2))
    crashed = LaunchRequest(job_id=45, attempt=1, offer=_offer(provider), spot=False, owner="o1", nodes=2)
    provider._group_create(crashed)  # the launch got this far
    provider.gang_grace_s = 0.0

    def services() -> set[str]:
        return {s.metadata.name for s in k8s.client().list(Service, namespace="default")}

    assert crashed.client_token in services()
    wait_until(lambda: (provider.list_managed(), crashed.client_token not in services())[1], timeout_s=20,
               what="the empty Service swept")
    assert live.id.split(":", 1)[1] in services()
    provider.terminate(live.id)


def test_a_queued_gangs_pods_are_one_kueue_pod_group(provider: KubernetesProvider) -> None:
    from gpuorch_kubernetes import pods

    request = LaunchRequest(job_id=46, attempt=1, offer=_offer(provider), spot=False, owner="o1", nodes=3,
                            node=2, placement_group="gpuorch-o1-46-1")
    m = pods.manifest(request, namespace="default", image="python:3.11-slim", gpu_resource="nvidia.com/gpu",
                      products=["A100"], grace_s=30, python="python3", priority_class=None, local_queue="team",
                      gang=("gpuorch-o1-46-1-n2", "gpuorch-o1-46-1"))
    labels, annotations = m["metadata"]["labels"], m["metadata"]["annotations"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team"
    assert labels["kueue.x-k8s.io/pod-group-name"] == "gpuorch-o1-46-1" == labels["gpuorch.dev/gang"]
    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "3" and labels["gpuorch.dev/node"] == "2-of-3"
    assert (m["spec"]["hostname"], m["spec"]["subdomain"]) == ("gpuorch-o1-46-1-n2", "gpuorch-o1-46-1")


class _Crash(BaseException):
    """The daemon process dying mid-call (not an error any code handles)."""


@pytest.mark.parametrize("pods_made", [0, 1])
def test_a_crash_mid_gang_launch_then_a_restart_leaves_one_gang(k8s: Cluster, tmp_path: Path, pods_made: int) -> None:
    """Killed after the Service and ``pods_made`` pods, a restarted daemon's launch of the same
    attempt finds what is there (by the token's names) and makes only the rest."""
    request = LaunchRequest(job_id=47 + pods_made, attempt=1, offer=_offer_of(k8s, tmp_path), spot=False,
                            owner="o1", nodes=2)
    crashed = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
    cl, made = crashed.clusters["kmock"], []
    create = cl.create_pod

    def create_then_die(manifest: dict) -> dict | None:
        if len(made) == pods_made:
            raise _Crash
        made.append(manifest["metadata"]["name"])
        return create(manifest)

    cl.create_pod = create_then_die  # type: ignore[method-assign]
    with pytest.raises(_Crash):
        crashed.launch(request)
    restarted = KubernetesProvider.from_config(k8s.options(), tmp_path / "home")
    gang = restarted.launch(request)
    assert gang.id == f"kmock:{request.client_token}"
    job = {"gpuorch.dev/job": str(request.job_id)}
    assert sorted(p.metadata.name for p in k8s.client().list(Pod, namespace="default", labels=job)) == \
        [request.client_token, f"{request.client_token}-n1"]
    assert [s.metadata.name for s in k8s.client().list(Service, namespace="default", labels=job)] == \
        [request.client_token]
    assert [i.id for i in restarted.list_managed() if i.job_id == request.job_id] == [gang.id]
    restarted.terminate(gang.id)
    crashed.close()
    restarted.close()


def _offer_of(k8s: Cluster, tmp_path: Path) -> Offer:
    p = KubernetesProvider.from_config(k8s.options(), tmp_path / "offers")
    try:
        return _offer(p)
    finally:
        p.close()
