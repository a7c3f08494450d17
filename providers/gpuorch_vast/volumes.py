"""Vast volumes as the job volumes given at launch (``SupportsLaunchVolumes``).

A Vast (local) volume is disk rented on one machine (docs.vast.ai/documentation/instances/storage/
volumes; CLI reference "create volume", "show volumes", "delete volume"): made from a volume
offer of that machine (``POST /volumes/search/``, ``PUT /volumes/`` with ``{"size", "id", "name"}``),
listed by ``GET /volumes?owner=me``, deleted by ``DELETE /volumes/?id=`` once no instance uses it,
and linked to an instance when it is created: ``volume_info: {"volume_id", "mount_path",
"create_new": false}`` (the official client's ``build_volume_info``). So a job's volume decides its
host: it is made on the machine of the best live ask of the offer's class at the first launch,
and every later launch rents that machine again or waits (NoCapacityError) until its host lists
it. The volume's name carries the job and owner (``launch_volume_name``). Storage bills while the
volume exists at the volume offer's ``storage_cost`` (its host's price, $/GB-month; a field of
``search volumes``), carried as ``Volume.usd_per_gib_month`` for the ledger; ``show volumes``
lists no per-GB rate (docs.vast.ai/api-reference/volumes/list-volumes), so a volume found again
by its name after a lost answer or a crash carries none and is billed at the catalog's rate.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, TransientError
from gpuorch.provider import Offer, Volume
from gpuorch.provider.launch_volumes import launch_volume_name, launch_volume_tags

from .market import pick, query, storage_rate
from .parse import PROVIDER

if TYPE_CHECKING:
    from .api import VastApi
    from .config import VastOptions

log = logging.getLogger("gpuorch.vast")


def volume_name(row: dict[str, Any]) -> str:
    return str(row.get("name") or row.get("label") or "")


def to_volume(row: dict[str, Any], region: str = "", rate: float | None = None) -> Volume | None:
    tags = launch_volume_tags(volume_name(row))
    if not tags or row.get("id") is None:
        return None
    size = row.get("disk_space", row.get("size"))
    return Volume(id=str(row["id"]), provider=PROVIDER, region=region, zone=f"machine-{row.get('machine_id')}",
                  size_gib=float(size) if isinstance(size, int | float) else 0.0, tags=tags,
                  usd_per_gib_month=rate)


def offer_rate(slot: dict[str, Any]) -> float | None:
    """A volume offer's ``storage_cost`` ($/GB-month, a field of ``search volumes``): the rate its
    host bills the volume at. None where it gives none or one that is no price (logged: the ledger
    then bills the catalog's rate)."""
    rate = storage_rate(slot)
    if rate is None and "storage_cost" in slot:
        log.warning("vast: volume offer %s has storage_cost %r, not a price; billing the catalog's rate",
                    slot.get("id"), slot["storage_cost"])
    return rate


class MachineVolumes:
    """The ``SupportsLaunchVolumes`` half of ``VastProvider`` (its ``api`` and ``options``), and
    what ``submit`` checks of a job's ``volume:`` (capability ``disk_types``): no disk types to
    choose (a ``volume.type`` is refused here); the size a host can hold is known only at launch."""

    api: VastApi
    options: VastOptions

    @classmethod
    def volume_types(cls, options: dict[str, Any]) -> tuple[str, ...]:
        return ()

    @classmethod
    def volume_size_range(cls, options: dict[str, Any], disk_type: str | None = None) -> tuple[float, float] | None:
        return None

    def can_carry_volume(self, offer: Offer) -> bool:
        return True  # a volume offer comes with a machine's ask (NoCapacityError when none)

    def list_launch_volumes(self) -> list[Volume]:
        return [v for row in self.api.volumes() if (v := to_volume(row)) is not None]

    def _named(self, name: str) -> dict[str, Any] | None:
        return next((row for row in self.api.volumes() if volume_name(row) == name), None)

    def create_launch_volume(self, *, offer: Offer, size_gib: float, tags: dict[str, str]) -> Volume:
        """A volume of ``ceil(size_gib)`` GB on the machine of the best live ask of ``offer``'s
        class (on-demand price), named for the job; NoCapacityError when no ask or no volume offer
        of its machine is left."""
        name = launch_volume_name(tags)
        found, rate = self._named(name), None  # found again (a lost answer): its rate is not listed
        if found is None:
            asks = self.api.search(query(self.options, gpu=offer.gpu, count=offer.gpu_count, region=offer.region),
                                   bid=False, storage_gib=size_gib)
            chosen = pick(asks, offer, False, self.options)
            if chosen is None:
                raise NoCapacityError(f"vast: no live ask of {offer.instance_type} in {offer.region} to put a "
                                      "volume on", code="no_such_ask")
            machine = int(chosen[0]["machine_id"])
            slots = [o for o in self.api.volume_offers(machine, size_gib) if int(o.get("machine_id") or -1) == machine]
            if not slots:
                raise NoCapacityError(f"vast: machine {machine} sells no volume now", code="no_volume_offer")
            self.api.create_volume(int(slots[0]["id"]), math.ceil(size_gib), name)
            rate = offer_rate(slots[0])
            log.info("vast: created volume %s (%d GB) on machine %s at $%s/GB-month", name, math.ceil(size_gib),
                     machine, rate)
            found = self._named(name)
            if found is None:
                raise TransientError(f"vast: volume {name} was made and is not listed yet", code="VolumeCreating",
                                     retry_after=5.0)
        vol = to_volume(found, offer.region, rate)
        assert vol is not None  # its name is gpuorch's
        return vol

    def delete_launch_volume(self, volume_id: str) -> None:
        if not volume_id.isdigit() or not any(str(r.get("id")) == volume_id for r in self.api.volumes()):
            return
        try:
            self.api.delete_volume(int(volume_id))
        except NotFoundError:
            return
        except PermanentError as e:
            if "in use" in str(e).lower() or "in_use" in str(e).lower():
                raise TransientError(str(e), code="VolumeInUse", retry_after=30.0) from None
            raise
        log.info("vast: deleted volume %s", volume_id)

    def machine_of(self, volume_id: str) -> int:
        """The machine a launch naming ``volume_id`` must rent; PermanentError for no such volume."""
        row = next((r for r in self.api.volumes() if str(r.get("id")) == volume_id), None)
        if row is None or not isinstance(row.get("machine_id"), int):
            raise PermanentError(f"vast: volume {volume_id} does not exist", code="InvalidVolume.NotFound")
        return int(row["machine_id"])
