"""Job volumes on Kubernetes: PersistentVolumeClaims given at launch (``SupportsLaunchVolumes``).

- **create**: the claim ``gpuorch-<owner>-j<job>`` (``launch_volume_name``) in the offer's context
  and namespace, ``ReadWriteOnce`` of the size asked (whole GiB), of the context's
  ``storage_class`` (default: the cluster's default class), labelled with the managed mark, job and
  owner (the tags exactly in ``gpuorch.dev/tags``). Idempotent by that name: a 409 returns the
  claim already there (a repeat after a crash).
- **mount**: a launch naming the claim (``LaunchRequest.volumes``) mounts it into the pod at the
  request's mount path (``pods.manifest``); a claim that does not exist refuses the launch
  (PermanentError ``InvalidVolume.NotFound``), so a pod never waits for one.
- **keep**: a claim outlives its pods; the next attempt's pod mounts it again and reads what
  the last one wrote. It is deleted only by ``delete_launch_volume``, which refuses (TransientError
  ``VolumeInUse``) while a pod that is not over still mounts it.
- **list**: the claims labelled managed, with ``attached_to`` the live pod that mounts one.

Volume ids are ``<region>:<claim>`` like instance ids.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider import Offer
from gpuorch.provider.launch_volumes import launch_volume_name
from gpuorch.provider.port import Volume

from . import pods

if TYPE_CHECKING:
    from .cluster import Cluster

MAX_GIB = 65536  # 64 TiB: more than any one claim a cluster will bind
_TERMINAL = ("Succeeded", "Failed")


def claims_of(pod: dict[str, Any]) -> list[str]:
    """The PersistentVolumeClaims ``pod`` mounts."""
    return [str(v["persistentVolumeClaim"]["claimName"]) for v in (pod.get("spec") or {}).get("volumes") or []
            if (v.get("persistentVolumeClaim") or {}).get("claimName")]


def _gib(claim: dict[str, Any]) -> float:
    from .offers import quantity

    spec = claim.get("spec") or {}
    asked = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    have = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
    return quantity(have or asked) / 2**30


class KubeVolumes:
    """``SupportsLaunchVolumes`` of ``KubernetesProvider``; see the module docstring."""

    name: str
    clusters: dict[str, Cluster]

    if TYPE_CHECKING:
        def _where(self, instance_id: str) -> tuple[Cluster, str]: ...

    def _volume(self, cluster: Cluster, claim: dict[str, Any], users: dict[str, str]) -> Volume:
        meta = claim.get("metadata") or {}
        region = cluster.region.name
        return Volume(id=f"{region}:{meta.get('name')}", provider=self.name, region=region, zone=region,
                      size_gib=_gib(claim), attached_to=users.get(str(meta.get("name"))), tags=pods.tags_of(meta))

    def _users(self, cluster: Cluster) -> dict[str, str]:
        """claim name -> the instance id of a pod that is not over and mounts it."""
        out: dict[str, str] = {}
        for pod in cluster.pods():
            if (pod.get("status") or {}).get("phase") in _TERMINAL:
                continue
            for claim in claims_of(pod):
                out.setdefault(claim, f"{cluster.region.name}:{pod['metadata']['name']}")
        return out

    def create_launch_volume(self, *, offer: Offer, size_gib: float, tags: dict[str, str]) -> Volume:
        cluster = self.clusters.get(offer.region)
        if cluster is None:
            raise PermanentError(f"kubernetes region {offer.region!r} is not configured", code="InvalidVolume.Region")
        if not (math.isfinite(size_gib) and 0 < size_gib <= MAX_GIB):
            raise PermanentError(f"volume size {size_gib} GiB: give 1 to {MAX_GIB} GiB", code="InvalidVolume.Size")
        try:
            name = launch_volume_name(tags)
        except ValueError as e:
            raise PermanentError(str(e), code="InvalidVolume.Tags") from None
        r = cluster.region
        spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": f"{math.ceil(size_gib)}Gi"}}}
        if r.options.storage_class:
            spec["storageClassName"] = r.options.storage_class
        labels = pods.labels_of(tags)
        labels.pop(pods.LABEL_ATTEMPT, None)  # a job's volume outlives its attempts
        manifest = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": name, "namespace": r.namespace, "labels": labels,
            "annotations": {pods.ANNOTATION_TAGS: pods.tags_text(tags)}}, "spec": spec}
        created = cluster.create_claim(manifest)
        claim = created if created is not None else cluster.claim(name)  # 409: the first call's
        return self._volume(cluster, claim, {})

    def can_carry_volume(self, offer: Offer) -> bool:
        return offer.region in self.clusters

    def list_launch_volumes(self) -> list[Volume]:
        out = []
        for cluster in self.clusters.values():
            claims = cluster.claims({pods.LABEL_MANAGED: "true"})
            users = self._users(cluster) if claims else {}
            out += [self._volume(cluster, c, users) for c in claims]
        return out

    def delete_launch_volume(self, volume_id: str) -> None:
        try:
            cluster, name = self._where(volume_id)
        except NotFoundError:
            return
        user = self._users(cluster).get(name)
        if user is not None:
            raise TransientError(f"volume {volume_id} is mounted by pod {user}", code="VolumeInUse")
        cluster.delete_claim(name)

    def _check_claims(self, cluster: Cluster, names: list[str]) -> None:
        """PermanentError for a claim the launch names that does not exist."""
        for name in names:
            try:
                cluster.claim(name)
            except NotFoundError:
                raise PermanentError(f"{cluster.region.name}: volume {name!r} does not exist (a launch never "
                                     "waits for a claim)", code="InvalidVolume.NotFound") from None
