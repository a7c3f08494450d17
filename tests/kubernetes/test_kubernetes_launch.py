"""Launch edge cases and bad configuration of the Kubernetes provider, against kmock and the fake kubelet.

- a pod created for the attempt between the provider's look and its create (another daemon, or a
  restart racing a relaunch) answers 409, and the launch adopts it: one pod, never two;
- a quota, a full cluster, an unpullable image and a forbidden namespace reach the domain tree;
- each configuration mistake is one line naming the option and the fix (``gpuorch daemon`` exits 2).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from k8s_harness import NODES, cluster

from gpuorch.errors import NoCapacityError, NotFoundError, QuotaError, UserInputError
from gpuorch.provider.port import LaunchRequest
from gpuorch.testing import wait_until
from gpuorch_kubernetes import KubernetesProvider
from gpuorch_kubernetes.cluster import Cluster

pytestmark = pytest.mark.kubernetes


@pytest.fixture
def k8s(tmp_path: Path):
    with cluster(tmp_path) as c:
        yield c


def request(p: KubernetesProvider, itype: str = "T4x1", attempt: int = 1) -> LaunchRequest:
    offer = next(o for o in p.offers() if o.instance_type == itype)
    return LaunchRequest(job_id=5, attempt=attempt, offer=offer, spot=False, owner="inst1")


@pytest.fixture
def roomy(tmp_path: Path):
    """A cluster whose T4 node has room for two pods: the other daemon's pod, once the fake
    kubelet binds it, leaves the capacity check room (with one T4 it failed there in a CI run
    under load: the other pod was bound first, and no create was sent)."""
    nodes = tuple(replace(n, gpus=2) if n.product == "Tesla-T4" else n for n in NODES)
    with cluster(tmp_path, nodes) as c:
        yield c


def test_a_409_on_create_adopts_the_pod_already_there(roomy, tmp_path: Path, monkeypatch) -> None:
    k8s = roomy
    p = KubernetesProvider.from_config(k8s.options(), tmp_path / "a")
    other = KubernetesProvider.from_config(k8s.options(), tmp_path / "b")  # another daemon of the installation
    req = request(p)
    real_pod = Cluster.pod
    raced: list[str] = []

    def look_then_lose_the_race(self: Cluster, name: str) -> dict:
        if not raced:  # the other daemon creates the pod right after this look found none
            raced.append("")
            raced[0] = other.launch(req).id
            raise NotFoundError(f"pods {name!r} not found")
        return real_pod(self, name)

    monkeypatch.setattr(Cluster, "pod", look_then_lose_the_race)
    adopted = p.launch(req)
    assert adopted.id == raced[0]
    assert [i.id for i in p.list_managed() if i.job_id == 5] == [adopted.id]
    statuses = [r for r in k8s.server.emulator if r.method.value == "POST" and r.url.path.endswith("/pods")]
    assert len(statuses) == 2  # both created; the second was answered 409 and created nothing


def test_a_full_cluster_is_no_capacity_and_creates_nothing(k8s, tmp_path: Path) -> None:
    p = KubernetesProvider.from_config(k8s.options(), tmp_path)
    req = request(p)
    first = p.launch(req)
    wait_until(lambda: p.get(first.id).state.value == "running", what="the T4 pod to run")
    with pytest.raises(NoCapacityError, match="no Ready node has 1 T4 free"):
        p.launch(req.model_copy(update={"attempt": 2}))
    assert [i.attempt for i in p.list_managed()] == [1]


def test_an_exceeded_quota_is_a_quota_error(k8s, tmp_path: Path) -> None:
    p = KubernetesProvider.from_config(k8s.options(), tmp_path)
    k8s.server.emulator.reject_pods("default", "gpu, requested: requests.nvidia.com/gpu=1, used: 4, limited: 4")
    with pytest.raises(QuotaError, match="exceeded quota: gpu"):
        p.launch(request(p, "A100-80GBx1"))


def test_an_unpullable_image_ends_the_attempt_with_the_clusters_message(k8s, tmp_path: Path) -> None:
    k8s.kubelet.unpullable["registry.example/missing:1"] = "manifest unknown"
    p = KubernetesProvider.from_config(k8s.options(context={"image": "registry.example/missing:1"}), tmp_path)
    inst = p.launch(request(p))
    ended = wait_until(lambda: (i := p.get(inst.id)) and not i.state.alive and i, what="the pull to fail")
    assert ended.state.value == "terminated"
    assert ended.state_reason == ('ImagePullBackOff: Back-off pulling image "registry.example/missing:1": '
                                  "manifest unknown")


def test_a_lost_node_is_a_preemption_without_notice(k8s, tmp_path: Path) -> None:
    p = KubernetesProvider.from_config(k8s.options(node_lost_s=0.5), tmp_path)
    inst = p.launch(request(p))
    wait_until(lambda: p.get(inst.id).state.value == "running", what="the pod to run")
    k8s.kubelet.lose_node("gpu-t4-1")
    lost = wait_until(lambda: (i := p.get(inst.id)) and not i.state.alive and i, what="the loss to be seen")
    assert lost.state.value == "preempted" and lost.preemption_deadline is None
    assert "node gpu-t4-1 lost" in (lost.state_reason or "")


# -- bad configuration: one line, naming the option and the fix ---------------------------------
@pytest.mark.parametrize(("change", "message"), [
    ({"context": {"context": "nope"}}, "providers.kubernetes.contexts.0.context: 'nope' is not a context of"),
    ({"kubeconfig": "/nonexistent/kubeconfig"}, "providers.kubernetes.kubeconfig: /nonexistent/kubeconfig is not a"),
    ({"context": {"price_per_gpu_hour": -1}},
     "providers.kubernetes.contexts.0.price_per_gpu_hour: must be at least 0; raise it"),
    ({"context": {"price_per_gpu_hour": math.nan}}, "providers.kubernetes.contexts.0.price_per_gpu_hour: "),
    ({"context": {"price_per_gpu_hour": True}}, "providers.kubernetes.contexts.0.price_per_gpu_hour: "),
    ({"context": {"price_per_gpu_hour": "free"}}, "providers.kubernetes.contexts.0.price_per_gpu_hour: "),
    ({"context": {"gpu_resource": "example.com/gpu"}},
     "providers.kubernetes.contexts.0.gpu_resource: no node of context 'kmock' has 'example.com/gpu'"),
    ({"context": {"gpu_resource": "not a resource"}}, "providers.kubernetes.contexts.0.gpu_resource: 'not a"),
    ({"context": {"namespace": "Team_A"}}, "providers.kubernetes.contexts.0.namespace: 'Team_A' is not valid"),
    ({"context": {"zone": "a"}}, "providers.kubernetes.contexts.0.zone: unknown option; known: context, region"),
    ({"regions": ["a"]}, "providers.kubernetes.regions: unknown option; known: kubeconfig, contexts"),
    ({"termination_grace_s": 0}, "providers.kubernetes.termination_grace_s: must be at least 5; raise it"),
])  # fmt: skip
def test_configuration_mistakes_are_one_line_naming_the_option(k8s, tmp_path: Path, change: dict,
                                                                 message: str) -> None:
    with pytest.raises(UserInputError) as e:
        KubernetesProvider.from_config(k8s.options(**change), tmp_path)
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_namespace_without_permission_is_refused_at_start(k8s, tmp_path: Path) -> None:
    k8s.server.emulator.forbid("locked")
    with pytest.raises(UserInputError) as e:
        KubernetesProvider.from_config(k8s.options(context={"namespace": "locked"}), tmp_path)
    text = str(e.value)
    assert text.startswith("providers.kubernetes.contexts.0.namespace: 'locked': ") and "\n" not in text
    assert "bind it the Role in docs/kubernetes.md" in text


def test_the_daemon_exits_2_with_one_line_for_a_missing_context(k8s, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"providers": {"kubernetes": k8s.options(context={"context": "prod"})}}))
    env = {**os.environ, "GPUORCH_HOME": str(tmp_path / "home"), "GPUORCH_CONFIG": str(config)}
    done = subprocess.run([sys.executable, "-m", "gpuorch", "daemon", "--once"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "providers.kubernetes.contexts.0.context: 'prod' is not a context" in lines[0]
    assert not (tmp_path / "home" / "kubernetes" / "offers.json").exists()


def test_a_higher_priority_pod_preempts_ours_with_the_schedulers_reason(k8s, tmp_path: Path) -> None:
    from lightkube.resources.core_v1 import Pod

    k8s.kubelet.priority_classes.update({"batch-low": 10, "urgent": 1000})
    p = KubernetesProvider.from_config(k8s.options(context={"priority_class": "batch-low"}), tmp_path)
    inst = p.launch(request(p))
    wait_until(lambda: p.get(inst.id).state.value == "running", what="our pod to run")
    k8s.client().create(Pod.from_dict({"metadata": {"name": "urgent"}, "spec": {
        "priorityClassName": "urgent", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"],
                                                       "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["Tesla-T4"]}]}]}}}}}))
    noticed = wait_until(lambda: (i := p.get(inst.id)).preemption_deadline and i, what="the preemption notice")
    assert noticed.state.alive and "PreemptionByScheduler" in (noticed.state_reason or "")
    gone = wait_until(lambda: (i := p.get(inst.id)) and not i.state.alive and i, timeout_s=30, what="the preemption")
    assert gone.state.value == "preempted" and "PreemptionByScheduler" in (gone.state_reason or "")
