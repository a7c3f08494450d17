"""Lambda persistent filesystems as the job volumes given at launch (``SupportsLaunchVolumes``).

Shapes from the Lambda Cloud API reference (https://docs-api.lambda.ai/api/cloud, "Filesystems";
docs.lambda.ai/public-cloud/filesystems): ``GET /file-systems`` lists the account's filesystems
(``id``, ``name``, ``mount_point``, ``region.name``, ``is_in_use``, ``bytes_used``), ``POST
/filesystems`` with ``{"name", "region"}`` creates one, ``DELETE /filesystems/{id}`` deletes it
(refused while an instance uses it), and a launch names the filesystems it mounts in
``file_system_names`` (the same region as the instance, else
``instance-operations/launch/file-system-in-wrong-region``). An instance mounts each one over NFS
at ``/lambda/nfs/<name>``.

A filesystem has no tags and no size (it grows as it is written, billed per GiB used): its name
carries the job and owner (``launch_volume_name``), a name being unique in an account. The job's
``volume.mount`` is a link to the NFS mount, made by the instance's cloud-init at boot
(``boot_links``), before any SSH session, so the agent and the job see the volume where the spec
says.
"""

from __future__ import annotations

import logging
import posixpath
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider import LaunchRequest, Offer, Volume
from gpuorch.provider.launch_volumes import launch_volume_name, launch_volume_tags

from .catalog import PROVIDER

if TYPE_CHECKING:
    from .api import LambdaApi
    from .config import LambdaOptions

log = logging.getLogger("gpuorch.lambda")
NFS_ROOT = "/lambda/nfs"
GIB = 1 << 30


def to_volume(d: dict[str, Any]) -> Volume | None:
    """A listed filesystem as a ``Volume`` (size: the GiB written); None for one that is not gpuorch's."""
    tags = launch_volume_tags(str(d.get("name") or ""))
    if not tags or not d.get("id"):
        return None
    region = str((d.get("region") or {}).get("name") or "")
    used = d.get("bytes_used")
    size = used / GIB if isinstance(used, int | float) and used > 0 else 0.0
    return Volume(id=str(d["id"]), provider=PROVIDER, region=region, zone=region, size_gib=size,
                  attached_to="in use" if d.get("is_in_use") else None, tags=tags)


def boot_links(names_and_mounts: list[tuple[str, str]]) -> list[list[str]]:
    """cloud-init ``bootcmd`` entries (argv lists) that link each job's mount path to its
    filesystem's NFS mount: ``mkdir -p <parent>``, ``ln -sfn /lambda/nfs/<name> <mount>``."""
    out: list[list[str]] = []
    for name, mount in names_and_mounts:
        out.append(["mkdir", "-p", posixpath.dirname(mount.rstrip("/")) or "/"])
        out.append(["ln", "-sfn", f"{NFS_ROOT}/{name}", mount.rstrip("/")])
    return out


class FileSystems:
    """The ``SupportsLaunchVolumes`` half of ``LambdaProvider`` (its ``_api`` and ``options``), and
    what ``submit`` checks of a job's ``volume:`` (capability ``disk_types``): no disk types to
    choose (a ``volume.type`` is refused here), no size limit (a filesystem grows as it is written)."""

    _api: LambdaApi
    options: LambdaOptions

    @classmethod
    def volume_types(cls, options: dict[str, Any]) -> tuple[str, ...]:
        return ()

    @classmethod
    def volume_size_range(cls, options: dict[str, Any], disk_type: str | None = None) -> tuple[float, float] | None:
        return None

    def can_carry_volume(self, offer: Offer) -> bool:
        return True  # every instance type mounts filesystems of its region

    def list_launch_volumes(self) -> list[Volume]:
        return [v for d in self._api.file_systems() if (v := to_volume(d)) is not None]

    def create_launch_volume(self, *, offer: Offer, size_gib: float, tags: dict[str, str]) -> Volume:
        """A filesystem in the offer's region named for the job (found again by that name)."""
        if offer.provider != PROVIDER:
            raise PermanentError(f"offer of provider {offer.provider!r} sent to {PROVIDER}", code="InvalidOffer")
        if not self.options.allows(offer.region):
            raise PermanentError(f"lambda: region {offer.region} is not in providers.lambda.regions",
                                 code="InvalidOffer.Region")
        name = launch_volume_name(tags)
        for d in self._api.file_systems():
            if d.get("name") == name:
                found = to_volume(d)
                if found is not None:
                    return found.model_copy(update={"size_gib": max(found.size_gib, size_gib)})
        d = self._api.create_file_system(name, offer.region)
        log.info("lambda: created filesystem %s (%s) in %s", d.get("id"), name, offer.region)
        made = to_volume(d)
        if made is None:
            raise PermanentError(f"lambda: create filesystem {name}: the answer names no filesystem",
                                 code="Unparseable")
        return made.model_copy(update={"size_gib": max(made.size_gib, size_gib)})

    def delete_launch_volume(self, volume_id: str) -> None:
        mine = [d for d in self._api.file_systems() if str(d.get("id")) == volume_id]
        if not mine:
            return
        if mine[0].get("is_in_use"):
            raise TransientError(f"lambda: filesystem {volume_id} is still mounted by an instance",
                                 code="VolumeInUse", retry_after=30.0)
        try:
            self._api.delete_file_system(volume_id)
        except NotFoundError:
            return
        log.info("lambda: deleted filesystem %s", volume_id)

    def launch_file_systems(self, request: LaunchRequest) -> list[tuple[str, str]]:
        """(name, mount path) of each volume the request names, checked: in the launch's region."""
        if not request.volumes:
            return []
        listed = {str(d.get("id")): d for d in self._api.file_systems()}
        out = []
        for spec in request.volumes:
            d = listed.get(spec.volume_id)
            if d is None:
                raise PermanentError(f"lambda: filesystem {spec.volume_id} does not exist",
                                     code="InvalidVolume.NotFound")
            region = str((d.get("region") or {}).get("name") or "")
            if region != request.offer.region:
                raise PermanentError(f"lambda: filesystem {d.get('name')} is in {region}, the launch in "
                                     f"{request.offer.region}", code="InvalidVolume.ZoneMismatch")
            out.append((str(d.get("name")), spec.mount_path))
        return out
