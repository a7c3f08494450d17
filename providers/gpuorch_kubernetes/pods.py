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
- a pod of a Kueue LocalQueue not scheduled yet is ``queued`` (waiting for admission is not
  booting), and its ``created_at`` is when it was scheduled, after admission: the daemon's boot
  clock and billing start there (a pod ended without ever being scheduled bills nothing);
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
from gpuorch.provider.port import TAG_ATTEMPT, TAG_JOB, TAG_NODE, TAG_OWNER

from .podscripts import BOOTSTRAP

LABEL_MANAGED = "gpuorch.dev/managed"
LABEL_JOB = "gpuorch.dev/job"
LABEL_ATTEMPT = "gpuorch.dev/attempt"
LABEL_OWNER = "gpuorch.dev/owner"
LABEL_GANG = "gpuorch.dev/gang"  # a gang's pods: the name of its headless Service (gang.py)
LABEL_NODE = "gpuorch.dev/node"  # a gang pod's "<rank>-of-<nodes>"
ANNOTATION_TAGS = "gpuorch.dev/tags"
ANNOTATION_OFFER = "gpuorch.dev/instance-type"
ANNOTATION_SPOT = "gpuorch.dev/spot"
ANNOTATION_TERMINATED = "gpuorch.dev/terminated-by"
FINALIZER = "gpuorch.dev/attempt"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
# Kueue's plain pod groups (kueue.sigs.k8s.io, "Run Plain Pods": a group of pods): one Workload,
# admitted all at once, for a gang's pods.
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
TOMBSTONE_S = 3600.0
_LABEL_VALUE = re.compile(r"[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?")


def owner_label(owner: str) -> str:
    return owner if _LABEL_VALUE.fullmatch(owner) else hashlib.sha256(owner.encode()).hexdigest()[:16]


def labels_of(tags: dict[str, str]) -> dict[str, str]:
    """The selectable labels of a resource tagged ``tags`` (managed, job, attempt, owner, node)."""
    labels = {LABEL_MANAGED: "true", LABEL_JOB: tags.get(TAG_JOB, ""), LABEL_ATTEMPT: tags.get(TAG_ATTEMPT, ""),
              "app.kubernetes.io/managed-by": "gpuorch"}
    if tags.get(TAG_OWNER):
        labels[LABEL_OWNER] = owner_label(tags[TAG_OWNER])
    if tags.get(TAG_NODE):
        labels[LABEL_NODE] = tags[TAG_NODE]
    return labels


def tags_text(tags: dict[str, str]) -> str:
    return json.dumps(tags, sort_keys=True)


def tags_of(meta: dict[str, Any]) -> dict[str, str]:
    """The port's tags from an object's ``gpuorch.dev/tags`` annotation ({} when unreadable)."""
    try:
        raw = json.loads((meta.get("annotations") or {}).get(ANNOTATION_TAGS, "{}"))
        return {str(k): str(v) for k, v in raw.items()}
    except (ValueError, AttributeError):
        return {}


def manifest(request: LaunchRequest, *, namespace: str, image: str, gpu_resource: str, products: list[str],
             grace_s: int, python: str, priority_class: str | None, local_queue: str | None,
             gang: tuple[str, str] | None = None, claims: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The attempt's pod. ``gang``: (hostname, Service) of a gang node: the pod is selected by
    the gang's headless Service and named ``<hostname>.<Service>`` in the cluster DNS.
    ``claims``: (PersistentVolumeClaim, mount path) of each job volume, mounted there."""
    labels = labels_of(request.tags)
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
    for k, (claim, path) in enumerate(claims):
        spec["volumes"].append({"name": f"vol{k}", "persistentVolumeClaim": {"claimName": claim}})
        spec["containers"][0]["volumeMounts"].append({"name": f"vol{k}", "mountPath": path})
    if priority_class:
        spec["priorityClassName"] = priority_class
    annotations = {ANNOTATION_TAGS: tags_text(request.tags), ANNOTATION_OFFER: request.offer.instance_type,
                   ANNOTATION_SPOT: "true" if request.spot else "false"}
    if gang is not None:
        spec["hostname"], spec["subdomain"] = gang
        labels[LABEL_GANG] = gang[1]
        if local_queue:  # Kueue admits the gang's pods together, or none of them
            labels[KUEUE_GROUP], annotations[KUEUE_GROUP_COUNT] = gang[1], str(request.nodes)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": request.client_token, "namespace": namespace, "labels": labels, "finalizers": [FINALIZER],
        "annotations": annotations}, "spec": spec}


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
    tags = tags_of(meta)
    phase = status.get("phase")
    deleting = _time(meta.get("deletionTimestamp"))
    ours = annotations.get(ANNOTATION_TERMINATED) == "gpuorch"
    disruption = _condition(pod, "DisruptionTarget")
    why = f"{disruption.get('reason')}: {disruption.get('message', '')}".strip(": ") if disruption else None
    deadline = ended = failure = None
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
        state, reason, ended, failure = InstanceState.TERMINATED, pulled, now, pulled  # never runs: failed, not lost
    elif deleting is not None and ours:  # going at gpuorch's request: ended for the daemon (a 1 s grace)
        state, reason, ended = InstanceState.TERMINATED, "terminated by gpuorch", deleting
    else:
        state = InstanceState.RUNNING if phase == "Running" else InstanceState.PENDING
        scheduled = _condition(pod, "PodScheduled")
        reason = (f"{scheduled.get('reason')}: {scheduled.get('message', '')}"
                  if scheduled and scheduled.get("status") == "False" else None)
        if deleting is not None:  # the kubelet's SIGTERM is the notice; it kills at the deletion time
            deadline, reason = deleting, why or "the pod is being deleted"
    created, queued = _time(meta.get("creationTimestamp")), None
    queue = (meta.get("labels") or {}).get(KUEUE_QUEUE)
    if queue:  # launched once Kueue admitted it and it was scheduled: the boot clock and billing start then
        created = scheduled_at(pod) or ended
        if state == InstanceState.PENDING and created is None and deleting is None:
            queued = f"Kueue LocalQueue {queue}: {reason or 'not admitted yet'}"
    return Instance(
        id=instance_id, provider=provider, region=region, zone=region,
        instance_type=annotations.get(ANNOTATION_OFFER, ""), spot=annotations.get(ANNOTATION_SPOT) == "true",
        state=state, tags=tags, created_at=created, host=status.get("podIP"), state_reason=reason,
        preemption_deadline=deadline, ended_at=ended if not state.alive else None, queued=queued,
        failure=failure)


def scheduled_at(pod: dict[str, Any]) -> datetime | None:
    """When the scheduler bound the pod (``PodScheduled`` True), else None."""
    c = _condition(pod, "PodScheduled")
    if not (pod.get("spec") or {}).get("nodeName") or not c or c.get("status") != "True":
        return None
    return _time(c.get("lastTransitionTime")) or _time((pod.get("status") or {}).get("startTime"))


def unschedulable_for(pod: dict[str, Any], now: datetime) -> tuple[float, str] | None:
    """(seconds, the scheduler's message) while the pod is unbound and ``PodScheduled`` is False
    with reason ``Unschedulable`` (dated by the condition's ``lastTransitionTime``); else None."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    c = _condition(pod, "PodScheduled")
    if not c or c.get("status") != "False" or c.get("reason") != "Unschedulable":
        return None
    since = _time(c.get("lastTransitionTime")) or now
    return max(0.0, (now - since).total_seconds()), str(c.get("message") or "no node fits")


def tombstone_expired(pod: dict[str, Any], now: datetime, keep_s: float = TOMBSTONE_S) -> bool:
    done = ended_at(pod)
    return done is not None and now - done >= timedelta(seconds=keep_s)
