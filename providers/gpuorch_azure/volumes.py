"""Managed disks as job volumes (``SupportsVolumes``): Premium SSD by default (``volume_type``),
tagged like every managed resource, zonal where the VM is zonal, attached on a fixed LUN.

A volume's id is the disk's ARM resource id; its name is derived from its tags (job and
installation, ``names.disk_name``), so a create repeated after a crash finds the disk the first
one made. A disk lives in its region and, when created for a zonal VM, in that VM's availability
zone: it attaches only to VMs in the same zone (a regional disk only to regional VMs). Attach
and detach go through ``attachDetachDataDisks`` (no read-modify-write of the VM) on LUN
``AZURE_LUN``, where the mount step finds it (``/dev/disk/azure/scsi1/lun<N>``,
gpuorch.runners.volume_mount). Attach is followed at most ``ATTACH_WAIT_S``, then says "not
yet" (TransientError) so a slow attach never holds the daemon's pass; detach is not followed.
A delete of a disk still attached is a TransientError
``VolumeInUse``: try again once it is detached.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider.disk_types import DiskTypes
from gpuorch.provider.port import TAG_MANAGED, Volume
from gpuorch.runners.volume_mount import AZURE_LUN

from .disks import SIZE_GIB, attachable, size_gib
from .names import DISK_NAME, azure_tags, disk_name, gpuorch_tags, is_vm_name, split_zone
from .parse import PROVIDER

if TYPE_CHECKING:
    from .calls import Arm
    from .config import AzureOptions

log = logging.getLogger("gpuorch.azure")
IN_USE_RETRY_S = 10.0
ATTACH_WAIT_S = 20.0  # an attach takes seconds; longer, and the next pass looks again


def zone_of(resource: dict[str, Any]) -> str:
    """gpuorch's zone name of a disk or VM: ``<region>-<n>`` when zonal, else the region."""
    region, zones = str(resource.get("location") or ""), resource.get("zones") or ()
    return f"{region}-{zones[0]}" if zones else region


def to_volume(d: dict[str, Any]) -> Volume:
    """A disk (ARM JSON) as a Volume; ``attached_to`` the VM name of its ``managedBy``."""
    props = d.get("properties") or {}
    managed_by = str(d.get("managedBy") or "")
    return Volume(id=str(d["id"]), provider=PROVIDER, region=str(d.get("location") or ""), zone=zone_of(d),
                  size_gib=float(props.get("diskSizeGB") or 0),
                  attached_to=managed_by.rstrip("/").rsplit("/", 1)[-1] or None, tags=gpuorch_tags(d.get("tags")))


def disk_body(region: str, zone: str, size: float, disk_type: str, tags: dict[str, str]) -> dict[str, Any]:
    """The disk's PUT body (pure): blank, of ``disk_type``, zonal when ``zone`` is."""
    body: dict[str, Any] = {"location": region, "tags": azure_tags(tags), "sku": {"name": disk_type},
                            "properties": {"creationData": {"createOption": "Empty"},
                                           "diskSizeGB": size_gib(disk_type, size)}}
    number = split_zone(zone, region)
    if number is not None:
        body["zones"] = [number]
    return body


class ManagedDisks(DiskTypes):
    """Mixed into ``AzureProvider``; see ``gpuorch.provider.port.SupportsVolumes``."""

    options: AzureOptions
    _arm: Arm

    DISK_SIZES = SIZE_GIB
    DISK_SIZE_DEFAULT = (4, 32767)
    _attachable = staticmethod(attachable)

    @classmethod
    def _default_disk_type(cls, options: dict[str, Any]) -> str:
        from .config import parse_options

        return parse_options(options).volume_type

    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str],
                      disk_type: str | None = None) -> Volume:
        """A blank disk of ``disk_type`` (default ``volume_type``) in ``zone`` (or regional), tagged ``tags`` and
        ``gpuorch:managed``. Idempotent by its tags (job, installation): the disk of that name is
        returned if it exists. PermanentError ``InvalidVolume.Size`` outside the type's limits."""
        if region not in self.options.regions:
            raise PermanentError(f"azure region {region} is not in providers.azure.regions", code="RegionNotConfigured")
        tags = {**tags, TAG_MANAGED: "true"}
        name = disk_name(tags)
        disk_type = disk_type or self.options.volume_type
        if disk_type not in SIZE_GIB:
            raise PermanentError(f"volume.type: {disk_type!r} is not an Azure volume disk type gpuorch knows; use one "
                                 f"of {', '.join(SIZE_GIB)}", code="InvalidVolume.DiskType")
        try:
            body = disk_body(region, zone, size_gib, disk_type, tags)
        except ValueError as e:
            raise PermanentError(str(e), code="InvalidVolume.Size") from None
        try:
            found = self._arm.get_disk(name)
        except NotFoundError:
            log.info("azure: creating disk %s (%s GiB) in %s", name, body["properties"]["diskSizeGB"], zone)
            return to_volume(self._arm.create_disk(name, body))
        log.info("azure: disk %s exists already: adopting it", name)
        return to_volume(found)

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        """Attach on LUN ``AZURE_LUN``; quiet if already attached there. PermanentError
        ``InvalidVolume.ZoneMismatch`` across zones (or regions), ``InvalidVolume.DiskType`` for a
        VM size that cannot attach the disk's type; TransientError ``VolumeInUse`` while another
        VM holds it; NotFoundError if either is gone."""
        raw = self._arm.get_disk(self._disk_name(volume_id))
        disk = to_volume(raw)
        if not is_vm_name(instance_id):
            raise NotFoundError(f"azure: {instance_id!r} is not a VM name gpuorch uses", code="NotFound")
        vm = self._arm.get_vm(instance_id)
        vm_zone = zone_of(vm)
        if disk.zone != vm_zone:
            raise PermanentError(
                f"volume {disk.id.rsplit('/', 1)[-1]} is in {disk.zone}, VM {instance_id} in {vm_zone}: a managed "
                f"disk attaches only to VMs in its own zone; launch in {disk.zone}", code="InvalidVolume.ZoneMismatch")
        if disk.attached_to is not None:
            if disk.attached_to.lower() == instance_id.lower():
                return
            raise TransientError(f"volume {volume_id} is attached to {disk.attached_to}; detach it first",
                                 code="VolumeInUse", retry_after=IN_USE_RETRY_S)
        size = str(((vm.get("properties") or {}).get("hardwareProfile") or {}).get("vmSize") or "")
        sku = str((raw.get("sku") or {}).get("name") or "")
        if size and sku and sku not in attachable(size):
            raise PermanentError(f"providers.azure.volume_type: {size} cannot attach a {sku} disk (no premium "
                                 "storage); set volume_type to StandardSSD_LRS", code="InvalidVolume.DiskType")
        try:
            done = self._arm.attach_detach(instance_id, {"dataDisksToAttach": [
                {"diskId": disk.id, "lun": AZURE_LUN, "caching": "None", "deleteOption": "Detach"}]}, ATTACH_WAIT_S)
        except PermanentError as e:
            if e.code in ("OperationNotAllowed", "Conflict", "AttachDiskWhileBeingDetached"):  # held, or busy: not yet
                raise TransientError(str(e), code="VolumeInUse", retry_after=IN_USE_RETRY_S) from None
            raise
        if not done:  # never hold the daemon's pass: the next call finds it attached
            raise TransientError(f"azure: attaching {volume_id} to {instance_id} still running", code="NotYet",
                                 retry_after=5.0)

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        """Detach from ``instance_id``; quiet if not attached there or either is gone."""
        try:
            disk = to_volume(self._arm.get_disk(self._disk_name(volume_id)))
        except NotFoundError:
            return
        if disk.attached_to is None or disk.attached_to.lower() != instance_id.lower():
            return
        try:
            self._arm.attach_detach(instance_id, {"dataDisksToDetach": [{"diskId": disk.id}]}, 0.0)
        except NotFoundError:
            return

    def delete_volume(self, volume_id: str) -> None:
        """Delete; quiet if already gone. TransientError ``VolumeInUse`` while attached."""
        try:
            disk = to_volume(self._arm.get_disk(self._disk_name(volume_id)))
        except NotFoundError:
            return
        if disk.attached_to is not None:
            raise TransientError(f"volume {volume_id} is still attached to {disk.attached_to}",
                                 code="VolumeInUse", retry_after=IN_USE_RETRY_S)
        self._arm.delete_disk(disk.id.rsplit("/", 1)[-1])

    def list_volumes(self) -> list[Volume]:
        """The resource group's disks tagged ``gpuorch:managed`` and named as volumes (OS disks
        go with their VM), in the configured regions."""
        return [to_volume(d) for d in self._arm.list_disks()
                if (d.get("tags") or {}).get(TAG_MANAGED) == "true" and str(d.get("name", "")).endswith("-vol")
                and d.get("location") in self.options.regions]

    def _disk_name(self, volume_id: str) -> str:
        """The disk name of a volume id of this resource group; NotFoundError for anything else."""
        prefix = (f"/subscriptions/{self.options.subscription_id}/resourceGroups/{self.options.resource_group}"
                  "/providers/Microsoft.Compute/disks/").lower()
        name = volume_id[len(prefix):]
        if not volume_id.lower().startswith(prefix) or not DISK_NAME.fullmatch(name):
            raise NotFoundError(f"azure: {volume_id!r} is not a disk of providers.azure.resource_group",
                                code="NotFound")
        return name
