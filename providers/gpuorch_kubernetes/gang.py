"""Multi-node gangs on Kubernetes (spec ``nodes: N``): ``KubernetesProvider``'s hooks of ``CloudGangs``.

A gang of N is N pods of one shape in one context, plus one headless Service (``clusterIP:
None``) for their rendezvous, which stands where a cloud's placement group does:

- the Service is named from the attempt's client token (``dns_label``), labelled with the
  attempt (managed, job, attempt, owner; the tags exactly in its ``gpuorch.dev/tags``
  annotation), selects the gang's pods by ``gpuorch.dev/gang`` and publishes them before they
  are Ready; it is created before node 0 (a 409 means it is there: quiet) and deleted when
  the gang ends (or by the sweep on ``list_managed`` once its gang is gone);
- node k is the pod ``<token>-n<k>`` (node 0: ``<token>``), with ``hostname`` = its name and
  ``subdomain`` = the Service, so the cluster DNS serves ``<pod>.<service>.<namespace>.svc``:
  that name of node 0 is every node's ``MASTER_ADDR`` ("DNS for Services and Pods", A records
  of a headless Service's pods); the port is ``gang.master_port(token)`` on every node;
- **all or nothing**: node 0's launch checks that the nodes have room for all N pods now
  (``NoCapacityError`` before anything is created: ``launch_gang`` then releases the Service);
  a gang pod the scheduler still cannot place after ``gang_unschedulable_s`` (a race with
  another pod) reads ended, PREEMPTED with the scheduler's message, which ends the gang;
- **one fate** (``gang_decide.gang_view``): one pod ended (evicted, deleted, its node lost) ends
  every pod, and the attempt relaunches; a deletion notice on one pod is the gang's notice.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError
from gpuorch.provider import Instance, LaunchRequest, Runner
from gpuorch.provider.gang import master_port, node_of
from gpuorch.provider.gang_cloud import CloudGangs
from gpuorch.provider.gang_decide import PlacementGroup, attempt_key
from gpuorch.provider.port import client_token, managed_tags

from . import pods
from .offers import parse_instance_type

if TYPE_CHECKING:
    from .cluster import Cluster

MAX_NODES = 64  # gpuorch's cap per gang on one cluster
GANG_UNSCHEDULABLE_S = 120.0  # a gang pod unplaced this long ends the gang (it would hold the others idle)
_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def dns_label(name: str) -> str:
    """``name`` if it is a DNS-1035 label (a Service name, a pod's hostname), else a stable
    ``gpuorch-<hash>`` one (a client token may be 64 characters; a label holds 63)."""
    return name if _LABEL.fullmatch(name) else f"gpuorch-{hashlib.sha256(name.encode()).hexdigest()[:40]}"


def gang_tags(tags: dict[str, str]) -> dict[str, str]:
    """The attempt's managed tags (without the node's) from a gang node's tags."""
    key = attempt_key(tags)
    if key is None:
        raise ValueError("a gang's Service needs the attempt's managed tags")
    owner, job, attempt = key
    return managed_tags(int(job), int(attempt), owner)


def service_manifest(name: str, namespace: str, tags: dict[str, str], port: int) -> dict[str, Any]:
    """The gang's headless Service: DNS records for its pods, Ready or not (the rendezvous runs
    before any pod is Ready), labelled and annotated with the attempt's tags."""
    meta = pods.labels_of(tags)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": name, "namespace": namespace, "labels": meta,
        "annotations": {pods.ANNOTATION_TAGS: pods.tags_text(tags)}}, "spec": {
        "clusterIP": "None", "publishNotReadyAddresses": True, "selector": {pods.LABEL_GANG: name},
        "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}]}}


class KubeGangs(CloudGangs):
    """The Kubernetes side of ``CloudGangs``; mixed into ``KubernetesProvider``."""

    clusters: dict[str, Cluster]
    gang_unschedulable_s: float = GANG_UNSCHEDULABLE_S

    if TYPE_CHECKING:  # the adapter's own helpers this mixin calls (defined on KubernetesProvider)
        def _launch_one(self, request: LaunchRequest) -> Instance: ...
        def _where(self, instance_id: str) -> tuple[Cluster, str]: ...
        def _terminate_one(self, instance_id: str) -> None: ...
        def _pod_runner(self, instance: Instance) -> Runner: ...
        def _instances(self, cluster: Cluster, listed: list[dict[str, Any]]) -> list[Instance]: ...

    def _node_launch(self, request: LaunchRequest) -> Instance:
        return self._launch_one(request)

    def _node_find(self, request: LaunchRequest) -> Instance | None:
        cluster = self.clusters.get(request.offer.region)
        if cluster is None:
            return None
        try:
            pod = cluster.pod(request.client_token)
        except NotFoundError:
            return None
        return self._instances(cluster, [pod])[0]

    def _nodes_of(self, node: Instance) -> list[Instance]:
        cluster = self.clusters.get(node.region)
        if cluster is None:
            raise NotFoundError(f"kubernetes region {node.region!r} is not configured", code="NotFound")
        group = self._group_at(_token(node), node.region, node.zone, node.tags)
        listed = cluster.pods({pods.LABEL_GANG: group.name})
        return [i for i in self._instances(cluster, listed) if node_of(i.tags) and i.owner == node.owner]

    def _nodes_terminate(self, ids: list[str]) -> None:
        for instance_id in ids:
            self._terminate_one(instance_id)

    def _node_address(self, node: Instance) -> str | None:
        """Node 0's DNS name under the gang's Service (``<pod>.<service>.<namespace>.svc``; the
        pod's resolver completes it with the cluster domain)."""
        cluster, name = self._where(node.id)
        service = self._group_at(_token(node), node.region, node.zone, node.tags).name
        return f"{dns_label(name)}.{service}.{cluster.region.namespace}.svc"

    def _node_runner(self, node: Instance) -> Runner:
        return self._pod_runner(node)

    def _gang_gpus(self, gang: Instance) -> int:
        shape = parse_instance_type(gang.instance_type)
        return shape[1] if shape else 1

    def _group_at(self, token: str, region: str, zone: str, tags: dict[str, str]) -> PlacementGroup:
        return PlacementGroup(name=dns_label(token), where=region, tags=gang_tags(tags))

    def _group_create(self, request: LaunchRequest) -> None:
        o = request.offer
        cluster = self.clusters.get(o.region)
        if cluster is None:
            return  # _launch_one refuses the offer
        token = request.placement_group or client_token(request.job_id, request.attempt, request.owner)
        group = self._group_at(token, o.region, o.zone, request.tags)
        cluster.create_service(service_manifest(group.name, cluster.region.namespace, group.tags,
                                                master_port(token)))

    def _group_list(self) -> list[PlacementGroup]:
        out = []
        for name, cluster in self.clusters.items():
            for svc in cluster.services({pods.LABEL_MANAGED: "true"}):
                meta = svc.get("metadata") or {}
                tags = pods.tags_of(meta)
                if attempt_key(tags) is not None:
                    out.append(PlacementGroup(name=str(meta.get("name")), where=name, tags=tags))
        return out

    def _group_delete(self, group: PlacementGroup) -> None:
        cluster = self.clusters.get(group.where)
        if cluster is not None:
            cluster.delete_service(group.name)


def _token(node: Instance) -> str:
    """The client token of the attempt ``node`` belongs to (node 0's: the Service's name)."""
    return client_token(node.job_id or 0, node.attempt or 0, node.owner)
