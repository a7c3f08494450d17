"""Kueue's admission of plain pods, for the fake kubelet (``fake_kubelet.py``).

As Kueue does it (https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/): a pod labelled
``kueue.x-k8s.io/queue-name`` gets the scheduling gate ``kueue.x-k8s.io/admission`` (Kueue's
webhook adds it at creation; here the kubelet's first sync that sees the pod unbound does, before
it could be scheduled), and the scheduler leaves a gated pod ``Pending`` with
``PodScheduled=False``, reason ``SchedulingGated``
(https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/).

Kueue admits a Workload, not a pod: a plain pod is a Workload of its own, and the pods labelled
``kueue.x-k8s.io/pod-group-name`` (with ``kueue.x-k8s.io/pod-group-total-count``) are one
Workload, admitted once all its pods exist, all of them at once or none
(https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/#running-a-group-of-pods-to-be-admitted-together).
A test admits with ``FakeKubelet.admit`` (naming any pod of the Workload): the Workload is
admitted at that moment, and the kubelet's next sync removes the gate from every one of its pods
before it schedules any of them, so a gang never starts in part.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from gpuorch.testing.kmock_ext import now_iso

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"  # the pod label naming its LocalQueue
KUEUE_GATE = "kueue.x-k8s.io/admission"  # the scheduling gate Kueue holds until admission
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"  # the label making pods one Workload
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"  # the annotation: how many pods it has
GATED = "Scheduling is blocked due to non-empty scheduling gates"  # the scheduler's message


def workload(meta: dict[str, Any]) -> tuple[str, str]:
    """(namespace, Workload) of a pod: its pod group's, else its own."""
    group = (meta.get("labels") or {}).get(KUEUE_GROUP)
    return meta["namespace"], f"group/{group}" if group else f"pod/{meta['name']}"


def admit(client: Any, admitted: set[tuple[str, str]], name: str, namespace: str) -> None:
    """Admit the Workload of pod ``name``: all its pods at once (``admitted`` holds it from now on;
    the kubelet's sync lifts their gates). ValueError for a pod group whose pods are not all there:
    Kueue does not admit a group before its ``pod-group-total-count`` pods exist."""
    from lightkube.resources.core_v1 import Pod

    meta = client.get(Pod, name, namespace=namespace).to_dict()["metadata"]
    key = workload(meta)
    group = (meta.get("labels") or {}).get(KUEUE_GROUP)
    if group:
        want = int((meta.get("annotations") or {}).get(KUEUE_GROUP_COUNT) or 1)
        have = len(list(client.list(Pod, namespace=namespace, labels={KUEUE_GROUP: group})))
        if have < want:
            raise ValueError(f"pod group {group}: {have} of {want} pods exist; Kueue admits the group once all do")
    admitted.add(key)


def gated(client: Any, admitted: AbstractSet[tuple[str, str]], pod: dict[str, Any],
          set_status: Callable[[dict[str, Any], dict[str, Any]], None]) -> bool:
    """Whether the scheduler must leave the unbound ``pod`` alone: it has scheduling gates (Kueue's,
    added here to a queued pod whose Workload is not admitted yet, and lifted here once it is). A
    gated pod's status says so, once."""
    from lightkube.resources.core_v1 import Pod

    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    queued = KUEUE_QUEUE in (meta.get("labels") or {})
    gates = spec.get("schedulingGates") or []
    if queued and workload(meta) in admitted:
        if any(g.get("name") == KUEUE_GATE for g in gates):
            gates = [g for g in gates if g.get("name") != KUEUE_GATE]
            client.patch(Pod, meta["name"], {"spec": {"schedulingGates": gates}}, namespace=meta["namespace"])
            spec["schedulingGates"] = gates
    elif queued and not gates:
        spec["schedulingGates"] = gates = [{"name": KUEUE_GATE}]
        client.patch(Pod, meta["name"], {"spec": {"schedulingGates": gates}}, namespace=meta["namespace"])
    if not gates:
        return False
    if [c.get("reason") for c in (pod.get("status") or {}).get("conditions") or []] != ["SchedulingGated"]:
        set_status(pod, {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": GATED,
             "lastTransitionTime": now_iso()}]})
    return True
