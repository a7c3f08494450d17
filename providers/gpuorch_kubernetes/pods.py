"""One pod per attempt: its manifest, and what a pod's state means as an ``Instance``.

Labels (selectable) carry the managed mark, job, attempt and owner; the annotation
``gpuorch.dev/tags`` carries the port's tags exactly (an owner need not be a valid label value).
The finalizer ``gpuorch.dev/attempt`` keeps a deleted pod as a tombstone (its last status, and its
name taken) so a restarted daemon that relaunches the attempt adopts it (409) instead of
creating a second pod; ``KubernetesProvider`` removes it once the tombstone has been ended for
``TOMBSTONE_S`` (as EC2 keeps a terminated instance listed for about an hour).

State, from the pod (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/):

- no ``deletionTimestamp``: ``Running`` is RUNNING, anything else not ended is PENDING (the reason
  says why: ``Unschedulable``, a Kueue admission wait, a pull in progress);
- a ``deletionTimestamp`` gpuorch did not ask for (a delete, an eviction, a drain, a preemption):
  alive, with ``preemption_deadline`` = the deletion time (the kubelet's SIGTERM reached the agent
  as a notice); ended, PREEMPTED with the ``DisruptionTarget`` reason when there is one;
- one gpuorch asked for (``terminate``): TERMINATED, dated at the deletion time;
- ended without a deletion (the container exited: the dead-man switch, a crash): TERMINATED;
- an image that cannot be pulled: TERMINATED at once with the kubelet's message;
- a node that stopped reporting for ``node_lost_s``: PREEMPTED, "node lost" (no notice came).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta
from typing import Any

from gpuorch.provider import Instance, InstanceState, LaunchRequest

from .podscripts import BOOTSTRAP

LABEL_MANAGED = "gpuorch.dev/managed"
LABEL_JOB = "gpuorch.dev/job"
LABEL_ATTEMPT = "gpuorch.dev/attempt"
LABEL_OWNER = "gpuorch.dev/owner"
ANNOTATION_TAGS = "gpuorch.dev/tags"
ANNOTATION_OFFER = "gpuorch.dev/instance-type"
ANNOTATION_SPOT = "gpuorch.dev/spot"
ANNOTATION_TERMINATED = "gpuorch.dev/terminated-by"
FINALIZER = "gpuorch.dev/attempt"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
TOMBSTONE_S = 3600.0
_LABEL_VALUE = re.compile(r"[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?")


def owner_label(owner: str) -> str:
    return owner if _LABEL_VALUE.fullmatch(owner) else hashlib.sha256(owner.encode()).hexdigest()[:16]


def manifest(request: LaunchRequest, *, namespace: str, image: str, gpu_resource: str, products: list[str],
             grace_s: int, python: str, priority_class: str | None, local_queue: str | None) -> dict[str, Any]:
    labels = {LABEL_MANAGED: "true", LABEL_JOB: str(request.job_id), LABEL_ATTEMPT: str(request.attempt),
              "app.kubernetes.io/managed-by": "gpuorch"}
    if request.owner:
        labels[LABEL_OWNER] = owner_label(request.owner)
    if local_queue:
        labels[KUEUE_QUEUE] = local_queue
    vendor = gpu_resource.split("/")[0]
    count = str(request.offer.gpu_count)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_s,
        "automountServiceAccountToken": False,  # the job needs no API access of ours
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": f"{vendor}/gpu.product", "operator": "In", "values": products}]}]}}},
        "containers": [{
            "name": "gpuorch", "image": image, "workingDir": "/gpuorch",
            "command": [python, "-c", BOOTSTRAP, str(grace_s), python],
            "resources": {"limits": {gpu_resource: count}, "requests": {gpu_resource: count}},
            "volumeMounts": [{"name": "run", "mountPath": "/gpuorch"}],
        }],
        "volumes": [{"name": "run", "emptyDir": {}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": request.client_token, "namespace": namespace, "labels": labels, "finalizers": [FINALIZER],
        "annotations": {ANNOTATION_TAGS: json.dumps(request.tags, sort_keys=True),
                        ANNOTATION_OFFER: request.offer.instance_type,
                        ANNOTATION_SPOT: "true" if request.spot else "false"}}, "spec": spec}


def _time(text: Any) -> datetime | None:
    if isinstance(text, datetime):
        return text
    if not text:
        return None
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def pull_failure(pod: dict[str, Any]) -> str | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in PULL_FAILURES:
            return f"{waiting['reason']}: {waiting.get('message') or 'the image cannot be pulled'}"
    return None


def ended_at(pod: dict[str, Any]) -> datetime | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        done = _time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        if done is not None:
            return done
    return _time((pod.get("metadata") or {}).get("deletionTimestamp"))


def to_instance(pod: dict[str, Any], *, provider: str, region: str, instance_id: str,
                lost_node: str | None, now: datetime) -> Instance:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    try:
        tags = {str(k): str(v) for k, v in json.loads(annotations.get(ANNOTATION_TAGS, "{}")).items()}
    except (ValueError, AttributeError):
        tags = {}
    phase = status.get("phase")
    deleting = _time(meta.get("deletionTimestamp"))
    ours = annotations.get(ANNOTATION_TERMINATED) == "gpuorch"
    disruption = _condition(pod, "DisruptionTarget")
    why = f"{disruption.get('reason')}: {disruption.get('message', '')}".strip(": ") if disruption else None
    deadline = None
    ended = None
    reason: str | None
    if phase in ("Succeeded", "Failed"):
        ended = ended_at(pod) or now
        if ours:
            state, reason = InstanceState.TERMINATED, "terminated by gpuorch"
        elif deleting is not None or disruption is not None:
            state, reason = InstanceState.PREEMPTED, why or "the pod was deleted"
        else:
            state, reason = InstanceState.TERMINATED, f"the pod's container exited ({phase})"
    elif lost_node is not None:
        state, reason, ended = InstanceState.PREEMPTED, f"node {lost_node} lost: it stopped reporting", now
    elif (pulled := pull_failure(pod)) is not None:
        state, reason, ended = InstanceState.TERMINATED, pulled, now
    elif deleting is not None and ours:  # going at gpuorch's request: ended for the daemon (a 1 s grace)
        state, reason, ended = InstanceState.TERMINATED, "terminated by gpuorch", deleting
    else:
        state = InstanceState.RUNNING if phase == "Running" else InstanceState.PENDING
        scheduled = _condition(pod, "PodScheduled")
        reason = (f"{scheduled.get('reason')}: {scheduled.get('message', '')}"
                  if scheduled and scheduled.get("status") == "False" else None)
        if deleting is not None:  # the kubelet's SIGTERM is the notice; it kills at the deletion time
            deadline, reason = deleting, why or "the pod is being deleted"
    return Instance(
        id=instance_id, provider=provider, region=region, zone=region,
        instance_type=annotations.get(ANNOTATION_OFFER, ""), spot=annotations.get(ANNOTATION_SPOT) == "true",
        state=state, tags=tags, created_at=_time(meta.get("creationTimestamp")), host=status.get("podIP"),
        state_reason=reason, preemption_deadline=deadline, ended_at=ended if not state.alive else None)


def tombstone_expired(pod: dict[str, Any], now: datetime, keep_s: float = TOMBSTONE_S) -> bool:
    done = ended_at(pod)
    return done is not None and now - done >= timedelta(seconds=keep_s)
