"""The fake kubelet (``gpuorch.testing.fake_kubelet``): scheduling by allocatable GPUs, pods as local
process groups, SIGTERM then SIGKILL on deletion, drains, lost nodes, preemption, image pulls."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import Node, Pod

from gpuorch.testing.e2e import wait_until
from gpuorch.testing.fake_kubelet import FakeKubelet, FakeNode

pytestmark = pytest.mark.kubernetes

# Writes "termed" on SIGTERM, then exits 0, or (ignore=True) ignores it.
WAITER = """import signal, sys, time
def term(*_):
    open('termed', 'w').write('1')
    if sys.argv[1] == 'exit':
        sys.exit(0)
signal.signal(signal.SIGTERM, term)
open('started', 'w').write('1')
while True:
    time.sleep(0.05)
"""


def pod(name: str, gpus: int = 1, *, on_term: str = "exit", grace: int = 30, image: str = "busybox",
        priority_class: str | None = None) -> Pod:
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": image, "command": [sys.executable, "-c", WAITER, on_term],
                            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return Pod.from_dict({"metadata": {"name": name, "labels": {"t": "1"}}, "spec": spec})


def phase(client, name: str) -> str | None:
    try:
        status = client.get(Pod, name).status
    except ApiError:
        return "(gone)"
    return status.phase if status else None


@pytest.fixture
def kubelet(kube, tmp_path: Path):
    with FakeKubelet(kube, tmp_path / "kubelet", [FakeNode("gpu-1", gpus=2)],
                     priority_classes={"high": 1000}) as k:
        yield k
    assert k.errors == []


def test_pods_bind_while_gpus_last_and_the_rest_wait_unschedulable(client, kubelet) -> None:
    for name in ("a", "b", "c"):
        client.create(pod(name))
    wait_until(lambda: phase(client, "a") == phase(client, "b") == "Running", what="a and b to run")
    waiting = wait_until(lambda: (c := client.get(Pod, "c")).status and c.status.conditions and c, what="c's condition")
    assert waiting.status.phase == "Pending" and waiting.spec.nodeName is None
    assert (waiting.status.conditions[0].reason, waiting.status.conditions[0].status) == ("Unschedulable", "False")
    assert "Insufficient nvidia.com/gpu" in waiting.status.conditions[0].message
    client.delete(Pod, "a")
    wait_until(lambda: phase(client, "c") == "Running", what="c to take a's GPU")


def test_a_deleted_pod_gets_sigterm_and_exec_runs_in_its_sandbox(client, kubelet) -> None:
    client.create(pod("a"))
    wait_until(lambda: phase(client, "a") == "Running", what="a to run")
    sandbox = kubelet.sandbox("default", "a")
    assert sandbox is not None
    wait_until(lambda: (sandbox / "started").exists(), what="the container to start")
    r = client.exec("a", command=["/bin/sh", "-c", 'echo "$POD"; cat started'], stdin=b"", stdout=True)
    assert (r.stdout, r.exit_code) == ("a\n1", 0)
    client.delete(Pod, "a")
    wait_until(lambda: phase(client, "a") == "(gone)", what="a to end")
    assert (sandbox / "termed").read_text() == "1"


def test_a_container_ignoring_sigterm_is_killed_after_its_grace(client, kubelet) -> None:
    client.create(pod("a", on_term="ignore", grace=1))
    wait_until(lambda: phase(client, "a") == "Running", what="a to run")
    sandbox = kubelet.sandbox("default", "a")
    wait_until(lambda: (sandbox / "started").exists(), what="the container to start")
    client.delete(Pod, "a")
    wait_until(lambda: phase(client, "a") == "(gone)", timeout_s=30, what="the kill after the grace")
    assert (sandbox / "termed").exists()


def test_a_drain_evicts_with_the_disruption_reason(client, kubelet) -> None:
    client.create(Pod.from_dict({**pod("a").to_dict(), "metadata": {"name": "a", "finalizers": ["x.io/keep"]}}))
    wait_until(lambda: phase(client, "a") == "Running", what="a to run")
    kubelet.drain("gpu-1")
    ended = wait_until(lambda: (p := client.get(Pod, "a")).status.phase == "Succeeded" and p, what="the eviction")
    assert ended.metadata.deletionTimestamp is not None
    assert ("DisruptionTarget", "EvictionByEvictionAPI") in [(c.type, c.reason) for c in ended.status.conditions]
    assert client.get(Node, "gpu-1").spec.unschedulable is True


def test_a_lost_node_kills_without_notice_and_goes_silent(client, kubelet) -> None:
    client.create(pod("a"))
    wait_until(lambda: phase(client, "a") == "Running", what="a to run")
    sandbox = kubelet.sandbox("default", "a")
    wait_until(lambda: (sandbox / "started").exists(), what="the container to start")
    kubelet.lose_node("gpu-1")
    ready = [c for c in client.get(Node, "gpu-1").status.conditions if c.type == "Ready"]
    assert [(c.status, c.reason) for c in ready] == [("Unknown", "NodeStatusUnknown")]
    assert phase(client, "a") == "Running"  # nobody reports it ended
    assert not (sandbox / "termed").exists()


def test_a_higher_priority_pod_preempts_with_the_schedulers_reason(client, kubelet) -> None:
    client.create(pod("low", gpus=2))
    wait_until(lambda: phase(client, "low") == "Running", what="low to run")
    client.create(pod("high", gpus=1, priority_class="high"))
    wait_until(lambda: phase(client, "high") == "Running", timeout_s=30, what="high to preempt low")
    assert phase(client, "low") == "(gone)"


def test_an_unpullable_image_backs_off_with_the_registrys_message(client, kubelet) -> None:
    kubelet.unpullable["registry.example/nope:1"] = "manifest unknown"
    client.create(pod("a", image="registry.example/nope:1"))

    def waiting():
        s = client.get(Pod, "a").status
        return s and s.containerStatuses and s.containerStatuses[0].state.waiting

    w = wait_until(waiting, what="the back-off")
    assert w.reason == "ImagePullBackOff" and "manifest unknown" in w.message


def test_a_pod_with_a_local_queue_waits_behind_kueues_gate_until_admitted(client, kubelet) -> None:
    from gpuorch.testing.fake_kueue import KUEUE_GATE, KUEUE_QUEUE

    queued = pod("q")
    queued.metadata.labels[KUEUE_QUEUE] = "team"
    client.create(queued)
    client.create(pod("plain"))
    wait_until(lambda: phase(client, "plain") == "Running", what="the plain pod to run")
    got = wait_until(lambda: (s := client.get(Pod, "q")).status and s.status.conditions and s,
                     what="the queued pod's status")
    assert [g.name for g in got.spec.schedulingGates] == [KUEUE_GATE] and got.spec.nodeName is None
    assert [(c.type, c.status, c.reason) for c in got.status.conditions] == [("PodScheduled", "False",
                                                                             "SchedulingGated")]
    kubelet.admit("q", "default")
    wait_until(lambda: phase(client, "q") == "Running", what="the admitted pod to run")
    assert client.get(Pod, "q").spec.schedulingGates in (None, [])


def test_kueue_admits_a_pod_group_as_one_workload_all_at_once(client, kubelet) -> None:
    """Pods of one pod group are one Workload: none runs before admission, admitting one of them
    admits all (their gates go in one sync), and a group whose pods are not all there yet is not
    admitted at all."""
    from gpuorch.testing.fake_kueue import KUEUE_GROUP, KUEUE_GROUP_COUNT, KUEUE_QUEUE

    def member(name: str) -> Pod:
        p = pod(name)
        p.metadata.labels.update({KUEUE_QUEUE: "team", KUEUE_GROUP: "gang"})
        p.metadata.annotations = {KUEUE_GROUP_COUNT: "2"}
        return p

    client.create(member("g0"))
    wait_until(lambda: client.get(Pod, "g0").spec.schedulingGates, what="g0 gated")
    with pytest.raises(ValueError, match="1 of 2 pods exist"):
        kubelet.admit("g0", "default")  # Kueue waits for the whole group
    client.create(member("g1"))

    def held(name: str) -> bool:
        s = client.get(Pod, name).status
        return bool(s and s.conditions and [c.reason for c in s.conditions] == ["SchedulingGated"])

    wait_until(lambda: held("g0") and held("g1"), what="the group to wait whole behind the gate")
    assert [client.get(Pod, n).spec.nodeName for n in ("g0", "g1")] == [None, None]
    kubelet.admit("g1", "default")  # naming either pod admits the Workload: both start
    wait_until(lambda: phase(client, "g0") == phase(client, "g1") == "Running", what="the whole group to run")
    assert [client.get(Pod, n).spec.schedulingGates for n in ("g0", "g1")] in ([None, None], [[], []])
