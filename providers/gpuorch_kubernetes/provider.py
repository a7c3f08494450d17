"""``KubernetesProvider``: GPUs of clusters you already run, one pod per attempt (docs/kubernetes.md).

Each configured context is a region (``config.py``). Offers are the nodes' allocatable GPUs, the
cluster's capacity (``offers.py``), at the context's price per GPU-hour (0 allowed:
``owned_capacity``); a launch finds out what is free (``NoCapacityError``: the daemon backs the
class off, and a job with ``max_wait`` waits for it). A launch creates the pod named by the client
token (``pods.py``); a 409 adopts the pod already there, so an attempt never gets two. The agent
runs in the pod beside the job (``podscripts.BOOTSTRAP``) and is driven through ``pods/exec``
(``runner.py``), so checkpoint sync, the notice and the dead-man switch work as on a VM. A gang
(``nodes: N``) is N pods and a headless Service for their rendezvous, all or nothing, with one
fate (``gang.py``). A job's volume is a PersistentVolumeClaim mounted into each of its pods
(``volumes.py``).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, ProviderError, UserInputError
from gpuorch.provider import Finding, Instance, InstanceState, LaunchRequest, Offer, Provider, Runner, utcnow
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import TAG_NODE

from . import pods
from .cluster import Cluster
from .config import PREFIX, KubernetesOptions, Region, parse_options, resolve
from .gang import MAX_NODES, KubeGangs, dns_label
from .offers import build_offers, node_gpus, node_ready, parse_instance_type
from .runner import PodRunner
from .volumes import KubeVolumes

log = logging.getLogger("gpuorch.kubernetes")
PROVIDER = "kubernetes"
_ID = re.compile(r"([a-z0-9][-a-z0-9]{0,62}):([a-z0-9][-a-z0-9.]{0,252})")


class KubernetesProvider(KubeGangs, KubeVolumes, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; also ``SupportsPreemptionInjection`` (a pod
    deleted with a grace period, as ``kubectl delete --grace-period`` does) and ``SupportsDoctor``.
    A gang's pods are one instance to the daemon (node 0's; ``gang.py``). Job volumes are
    PersistentVolumeClaims given at launch (``SupportsLaunchVolumes``; ``volumes.py``)."""

    name = PROVIDER
    # The run dir is the pod's emptyDir (gone with the pod); pods/exec goes over the network.
    capabilities = Capabilities(owned_capacity=True, runner_outlives_instance=False, runners_may_block=True,
                                launches_may_block=True, max_nodes=MAX_NODES, volumes_at_launch=True)

    def __init__(self, regions: list[Region], options: KubernetesOptions, home: Path) -> None:
        self.regions = {r.name: r for r in regions}
        self.clusters = {r.name: Cluster(r) for r in regions}
        self.options, self.home = options, Path(home)
        self._now, self._monotonic = utcnow, time.monotonic  # CloudGangs' clocks

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> KubernetesProvider:
        """Options per ``config.KubernetesOptions``; checks each context's namespace and GPU
        resource against the cluster (UserInputError naming the option); an unreachable cluster
        is only logged (the daemon starts, and its passes retry)."""
        opts = parse_options(options)
        provider = cls(resolve(opts), opts, Path(home) / PROVIDER)
        provider.check()
        return provider

    def check(self) -> None:
        for name, cluster in self.clusters.items():
            r = self.regions[name]
            try:
                cluster.pods()
            except ProviderError as e:
                if getattr(e, "code", None) in ("Forbidden", "Unauthorized"):
                    raise UserInputError(f"{r.where}.namespace: {r.namespace!r}: {str(e).split(': ', 2)[-1][:200]}; "
                                         "name a namespace this identity may use, or bind it the Role in "
                                         "docs/kubernetes.md") from None
                log.warning("%s: cannot check the cluster now: %s", r.where, e)
                continue
            try:
                nodes = cluster.nodes()
            except ProviderError as e:
                log.warning("%s: cannot list nodes: %s", r.where, e)
                continue
            resource = r.options.gpu_resource
            have = sorted({k for n in nodes for k in ((n.get("status") or {}).get("allocatable") or {}) if "/" in k})
            if nodes and not any(((n.get("status") or {}).get("allocatable") or {}).get(resource) for n in nodes):
                raise UserInputError(f"{r.where}.gpu_resource: no node of context {r.context!r} has {resource!r}; "
                                     f"the nodes offer {', '.join(have) or 'no extended resources'}")

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """The offers the daemon last read from the clusters (no cluster call)."""
        try:
            data = json.loads((Path(home) / PROVIDER / "offers.json").read_text())
            return [Offer.model_validate(o) for o in data]
        except (OSError, ValueError):
            return []

    # -- helpers ---------------------------------------------------------------------------------
    def _where(self, instance_id: str) -> tuple[Cluster, str]:
        m = _ID.fullmatch(instance_id)
        if m is None or m[1] not in self.clusters:
            raise NotFoundError(f"kubernetes instance {instance_id!r} not found", code="NotFound")
        return self.clusters[m[1]], m[2]

    def _lost(self, cluster: Cluster, pod: dict[str, Any], nodes: dict[str, dict[str, Any]] | None,
              now: datetime) -> str | None:
        name = (pod.get("spec") or {}).get("nodeName")
        if not name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return None
        node = nodes.get(name) if nodes is not None else cluster.node(name)
        if node is None:
            return name  # the node object is gone: so is the pod's kubelet
        if node_ready(node):
            return None
        since = [c.get("lastTransitionTime") for c in (node.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"]
        at = datetime.fromisoformat(str(since[0]).replace("Z", "+00:00")) if since and since[0] else now
        return name if now - at >= timedelta(seconds=self.options.node_lost_s) else None

    def _instance(self, cluster: Cluster, pod: dict[str, Any], nodes: dict[str, dict[str, Any]] | None,
                  now: datetime) -> Instance:
        name = pod["metadata"]["name"]
        lost = self._lost(cluster, pod, nodes, now)
        inst = pods.to_instance(pod, provider=self.name, region=cluster.region.name, lost_node=lost, now=now,
                                instance_id=f"{cluster.region.name}:{name}")
        stuck = pods.unschedulable_for(pod, now) if TAG_NODE in inst.tags else None
        if stuck is not None and stuck[0] >= self.gang_unschedulable_s and not cluster.region.options.local_queue:
            inst = inst.model_copy(update={"state": InstanceState.PREEMPTED, "ended_at": now,
                                           "state_reason": f"gang pod unschedulable for {stuck[0]:.0f} s: {stuck[1]}"})
        never = lost or pods.pull_failure(pod) or (stuck is not None and not inst.state.alive)
        if never and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            cluster.delete_pod(name, grace_s=0)  # never to run later (a node back, a pull that works)
        return inst

    def _instances(self, cluster: Cluster, listed: list[dict[str, Any]]) -> list[Instance]:
        """Listed pods as single instances (a gang's nodes each as itself)."""
        now = utcnow()
        nodes = {n["metadata"]["name"]: n for n in cluster.nodes()} if any(
            (p.get("spec") or {}).get("nodeName") for p in listed) else {}
        return [self._instance(cluster, pod, nodes, now) for pod in listed]

    # -- the port --------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        out: list[Offer] = []
        for name, cluster in self.clusters.items():
            r = self.regions[name]
            found = node_gpus(cluster.nodes(), cluster.pods(all_namespaces=True), r.options.gpu_resource)
            out += build_offers(self.name, name, r.options.price_per_gpu_hour, found)
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            (self.home / "offers.json").write_text(json.dumps([o.model_dump() for o in out]))
        except OSError as e:
            log.debug("offers cache not written: %s", e)
        return out

    def launch(self, request: LaunchRequest) -> Instance:
        """The pod named by the client token; an existing one (HTTP 409, or found first) is adopted.

        NoCapacityError when no Ready, schedulable node has the GPUs free now (nothing created):
        the daemon then tries another offer, or bursts to a cloud. Node 0 of a gang launches the
        gang: its Service, then every pod, all or nothing (gang.py)."""
        if request.nodes > 1 and request.node == 0:
            return self._gang_launch(request)
        return self._launch_one(request)

    def _launch_one(self, request: LaunchRequest) -> Instance:
        self.check_offer(request.offer)
        cluster = self.clusters.get(request.offer.region)
        shape = parse_instance_type(request.offer.instance_type)
        if cluster is None or shape is None:
            raise PermanentError(f"{request.offer.instance_type} in {request.offer.region} is not sold here",
                                 code="InvalidInstanceType")
        name, now = request.client_token, utcnow()
        try:
            return self._instance(cluster, cluster.pod(name), None, now)
        except NotFoundError:
            pass
        claims = tuple((self._claim_of(cluster, v.volume_id), v.mount_path) for v in request.volumes)
        self._check_claims(cluster, [c for c, _ in claims])
        r = cluster.region
        found = [n for n in node_gpus(cluster.nodes(), cluster.pods(all_namespaces=True), r.options.gpu_resource)
                 if n.gpu == shape[0] and n.total >= shape[1]]
        # A gang's room is checked once, for all its pods, at node 0 (its later pods are not bound yet).
        need = request.nodes if request.node == 0 else 0
        if sum(n.free // shape[1] for n in found) < need and not r.options.local_queue:
            what = f"for each of {need} pods of the gang" if need > 1 else "now"
            raise NoCapacityError(f"{r.name}: no Ready node has {shape[1]} {shape[0]} free {what}",
                                  code="Unschedulable")
        gang = None
        if request.nodes > 1:
            gang = (dns_label(name), dns_label(request.placement_group or ""))
        manifest = pods.manifest(request, namespace=r.namespace, image=r.options.image,
                                 gpu_resource=r.options.gpu_resource, products=sorted({n.product for n in found}),
                                 grace_s=self.options.termination_grace_s, python=self.options.python,
                                 priority_class=r.options.priority_class, local_queue=r.options.local_queue, gang=gang,
                                 claims=claims)
        created = cluster.create_pod(manifest)
        pod = created if created is not None else cluster.pod(name)  # 409: adopt the pod already there
        return self._instance(cluster, pod, None, now)

    def _claim_of(self, cluster: Cluster, volume_id: str) -> str:
        m = _ID.fullmatch(volume_id)
        if m is None or m[1] != cluster.region.name:
            raise PermanentError(f"volume {volume_id!r} is not a claim of context region {cluster.region.name}",
                                 code="InvalidVolume.NotFound")
        return m[2]

    def get(self, instance_id: str) -> Instance:
        cluster, name = self._where(instance_id)
        inst = self._instance(cluster, cluster.pod(name), None, utcnow())
        return self._gang_observe(inst) if TAG_NODE in inst.tags else inst

    def list_managed(self) -> list[Instance]:
        out, now = [], utcnow()
        for cluster in self.clusters.values():
            listed = cluster.pods({pods.LABEL_MANAGED: "true"})
            nodes = {n["metadata"]["name"]: n for n in cluster.nodes()} if any(
                (p.get("spec") or {}).get("nodeName") for p in listed) else {}
            for pod in listed:
                if (pod.get("metadata") or {}).get("deletionTimestamp") and pods.tombstone_expired(pod, now):
                    self._release(cluster, pod)
                    continue
                out.append(self._instance(cluster, pod, nodes, now))
        return self._gang_present(out)  # a gang as its node 0; sweeps the Services of ended gangs

    def _release(self, cluster: Cluster, pod: dict[str, Any]) -> None:
        """Drop an old tombstone's finalizer (the pod then goes)."""
        rest = [f for f in pod["metadata"].get("finalizers") or [] if f != pods.FINALIZER]
        try:
            cluster.patch_pod(pod["metadata"]["name"], {"metadata": {"finalizers": rest}})
        except NotFoundError:
            pass

    def terminate(self, instance_id: str) -> None:
        """Mark the pod as ended by gpuorch, then delete it with a short grace. Quiet if gone.
        A gang's node: every pod of the gang, then its Service."""
        try:
            cluster, name = self._where(instance_id)
            pod = cluster.pod(name)
        except NotFoundError:
            return
        if TAG_NODE in pods.tags_of(pod.get("metadata") or {}):
            self._gang_terminate(self._instance(cluster, pod, None, utcnow()))
            return
        self._terminate_pod(cluster, name, pod)

    def _terminate_one(self, instance_id: str) -> None:
        try:
            cluster, name = self._where(instance_id)
            self._terminate_pod(cluster, name, cluster.pod(name))
        except NotFoundError:
            return

    def _terminate_pod(self, cluster: Cluster, name: str, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return  # ended already: its tombstone stays until it expires
        try:
            cluster.patch_pod(name, {"metadata": {"annotations": {pods.ANNOTATION_TERMINATED: "gpuorch"}}})
        except NotFoundError:
            return
        cluster.delete_pod(name, grace_s=1)

    def runner(self, instance: Instance) -> Runner:
        """The pod's ``PodRunner``; a gang's: one per pod, node 0's DNS name as ``MASTER_ADDR``."""
        return self._gang_runner(instance) if TAG_NODE in instance.tags else self._pod_runner(instance)

    def _pod_runner(self, instance: Instance) -> Runner:
        cluster, name = self._where(instance.id)
        return PodRunner(cluster.client, cluster.region.namespace, name, self.options.python)

    def inject_preemption(self, instance_id: str, notice_s: float) -> None:
        """Delete the pod with a grace of ``notice_s`` (at least 1 s), as a preemption would."""
        cluster, name = self._where(instance_id)
        cluster.delete_pod(name, grace_s=max(1, math.ceil(notice_s)))

    def doctor(self) -> list[Finding]:
        out = []
        for name, cluster in self.clusters.items():
            r = self.regions[name]
            check = f"{PREFIX} {name}"
            try:
                listed = cluster.pods({pods.LABEL_MANAGED: "true"})
                found = node_gpus(cluster.nodes(), cluster.pods(all_namespaces=True), r.options.gpu_resource)
            except ProviderError as e:
                out.append(Finding.fail(check, str(e)[:300], "check the context, the network and the Role in "
                                                              "docs/kubernetes.md"))
                continue
            out.append(Finding.ok(check, f"context {r.context}, namespace {r.namespace}: "
                                         f"{sum(n.free for n in found)}/{sum(n.total for n in found)} GPUs free on "
                                         f"{len(found)} node(s); {len(listed)} gpuorch pod(s)"))
        return out

    def close(self) -> None:
        for cluster in self.clusters.values():
            cluster.close()
