"""Kueue's admission of plain pods, for the fake kubelet (``fake_kubelet.py``).

As Kueue does it (https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/): a pod labelled
``kueue.x-k8s.io/queue-name`` gets the scheduling gate ``kueue.x-k8s.io/admission`` (Kueue's
webhook adds it at creation; here the kubelet's first sync that sees the pod unbound does, before
it could be scheduled), and the scheduler leaves a gated pod ``Pending`` with
``PodScheduled=False``, reason ``SchedulingGated``
(https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/). Once the
pod's Workload is admitted, Kueue removes the gate and the pod is scheduled like any other: a
test admits it with ``FakeKubelet.admit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuorch.testing.kmock_ext import now_iso

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"  # the pod label naming its LocalQueue
KUEUE_GATE = "kueue.x-k8s.io/admission"  # the scheduling gate Kueue holds until admission
GATED = "Scheduling is blocked due to non-empty scheduling gates"  # the scheduler's message


def admit(client: Any, admitted: set[tuple[str, str]], name: str, namespace: str) -> None:
    """Admit the pod: remember it (never gated again) and remove Kueue's gate from it."""
    from lightkube.resources.core_v1 import Pod

    admitted.add((namespace, name))
    pod = client.get(Pod, name, namespace=namespace).to_dict()
    gates = [g for g in pod.get("spec", {}).get("schedulingGates") or [] if g.get("name") != KUEUE_GATE]
    client.patch(Pod, name, {"spec": {"schedulingGates": gates}}, namespace=namespace)


def gated(client: Any, admitted: set[tuple[str, str]], pod: dict[str, Any],
          set_status: Callable[[dict[str, Any], dict[str, Any]], None]) -> bool:
    """Whether the scheduler must leave the unbound ``pod`` alone: it has scheduling gates (Kueue's,
    added here to a queued pod not admitted yet). A gated pod's status says so, once."""
    from lightkube.resources.core_v1 import Pod

    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    queued = KUEUE_QUEUE in (meta.get("labels") or {}) and (meta["namespace"], meta["name"]) not in admitted
    if queued and not spec.get("schedulingGates"):
        spec["schedulingGates"] = [{"name": KUEUE_GATE}]
        client.patch(Pod, meta["name"], {"spec": {"schedulingGates": spec["schedulingGates"]}},
                     namespace=meta["namespace"])
    if not spec.get("schedulingGates"):
        return False
    if [c.get("reason") for c in (pod.get("status") or {}).get("conditions") or []] != ["SchedulingGated"]:
        set_status(pod, {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": GATED,
             "lastTransitionTime": now_iso()}]})
    return True
