"""RunPod network volumes as the job volumes given at launch (``SupportsLaunchVolumes``).

A network volume lives in one data center (docs.runpod.io/storage/network-volumes), on Secure
Cloud only, and a pod gets it when it is deployed: ``networkVolumeId``, mounted at
``volumeMountPath`` (the job's ``volume.mount``), the pod deployed in the volume's data center
(``dataCenterId``). It cannot be deleted while a pod uses it. Sizes 1 to 4000 GB, billed per
GB-month while it exists (catalog.py). Documents: ``documents.py``.

A volume has no tags: its name carries the job and owner (``launch_volume_name``) and is looked
for before another is created. New volumes go to ``providers.runpod.volume_data_center`` (else
``data_center``): RunPod's API does not say which data centers stock which GPU, so gpuorch does
not guess one.
"""

from __future__ import annotations

import logging
import math
import re
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider import Offer, Volume
from gpuorch.provider.launch_volumes import launch_volume_name, launch_volume_tags

from . import documents as doc
from .catalog import PROVIDER

if TYPE_CHECKING:
    from .api import RunpodApi
    from .config import RunpodOptions

log = logging.getLogger("gpuorch.runpod")
MAX_GB = 4000
_IN_USE = re.compile(r"in use|attached|being used|used by", re.I)


def to_volume(d: dict[str, Any]) -> Volume | None:
    tags = launch_volume_tags(str(d.get("name") or ""))
    if not tags or not d.get("id"):
        return None
    dc = str(d.get("dataCenterId") or "")
    size = d.get("size")
    return Volume(id=str(d["id"]), provider=PROVIDER, region=dc, zone=dc,
                  size_gib=float(size) if isinstance(size, int | float) else 0.0, tags=tags)


class NetworkVolumes:
    """The ``SupportsLaunchVolumes`` half of ``RunpodProvider`` (its ``_api`` and ``options``), and
    what ``submit`` checks of a job's ``volume:`` (capability ``disk_types``): no disk types to
    choose (a ``volume.type`` is refused here), 1 to 4000 GB."""

    _api: RunpodApi
    options: RunpodOptions

    @classmethod
    def volume_types(cls, options: dict[str, Any]) -> tuple[str, ...]:
        return ()

    @classmethod
    def volume_size_range(cls, options: dict[str, Any], disk_type: str | None = None) -> tuple[float, float] | None:
        return (1.0, float(MAX_GB))

    def _listed(self) -> list[dict[str, Any]]:
        data = self._api.query(doc.NETWORK_VOLUMES, what="list network volumes")
        vols = (data.get("myself") or {}).get("networkVolumes")
        return [v for v in vols if isinstance(v, dict)] if isinstance(vols, list) else []

    def can_carry_volume(self, offer: Offer) -> bool:
        """Secure Cloud pods only: community hosts have no network volumes."""
        return offer.region == "secure"

    def list_launch_volumes(self) -> list[Volume]:
        return [v for d in self._listed() if (v := to_volume(d)) is not None]

    def create_launch_volume(self, *, offer: Offer, size_gib: float, tags: dict[str, str]) -> Volume:
        """A network volume of ``ceil(size_gib)`` GB in the configured data center, named for the job."""
        if offer.region != "secure":
            raise PermanentError("runpod network volumes are on Secure Cloud only; a volume job runs on a "
                                 f"secure pod, not {offer.region}", code="InvalidVolume.Cloud")
        dc = self.options.volume_data_center or self.options.data_center
        if dc is None:
            raise PermanentError("runpod: a network volume needs a data center; set "
                                 "providers.runpod.volume_data_center (like EU-RO-1)", code="InvalidVolume.DataCenter")
        size = math.ceil(size_gib)
        if not 1 <= size <= MAX_GB:
            raise PermanentError(f"runpod network volumes are 1 to {MAX_GB} GB, not {size_gib:g}",
                                 code="InvalidVolume.Size")
        name = launch_volume_name(tags)
        for d in self._listed():
            if d.get("name") == name and (found := to_volume(d)) is not None:
                return found
        data = self._api.query(doc.CREATE_VOLUME, {"input": {"name": name, "size": size, "dataCenterId": dc}},
                               what=f"create network volume {name}")
        made = to_volume(data.get("createNetworkVolume") or {})
        if made is None:
            raise PermanentError(f"runpod create network volume {name}: the answer names no volume", code="Unparseable")
        log.info("runpod: created network volume %s (%s, %d GB) in %s", made.id, name, size, dc)
        return made

    def delete_launch_volume(self, volume_id: str) -> None:
        if not any(str(d.get("id")) == volume_id for d in self._listed()):
            return
        try:
            self._api.query(doc.DELETE_VOLUME, {"input": {"id": volume_id}}, what=f"delete network volume {volume_id}")
        except NotFoundError:
            return
        except PermanentError as e:
            if _IN_USE.search(str(e)):
                raise TransientError(str(e), code="VolumeInUse", retry_after=30.0) from None
            raise
        log.info("runpod: deleted network volume %s", volume_id)

    def volume_of(self, volume_id: str) -> dict[str, Any]:
        """The listed network volume a launch names; PermanentError when there is none."""
        for d in self._listed():
            if str(d.get("id")) == volume_id:
                return d
        raise PermanentError(f"runpod: network volume {volume_id} does not exist", code="InvalidVolume.NotFound")
