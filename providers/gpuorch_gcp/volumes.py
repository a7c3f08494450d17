"""Persistent disks as job volumes (``SupportsVolumes``): pd-balanced by default, labelled like
every managed resource, attached only inside their own zone.

A volume's id is ``<zone>/<disk name>``; the name is derived from the volume's tags (job and
installation, ``names.disk_name``), so a create repeated after a crash finds the disk the first
one made (409, or the same operation through ``requestId``) instead of making a second. Attach
uses the disk's name as its ``deviceName``, which is how the mount step finds it on the VM
(``/dev/disk/by-id/google-<name>``, gpuorch.runners.volume_mount).

The disk type is ``providers.gcp.volume_type``; a machine type that cannot attach it (A3 Ultra
and A4 take Hyperdisk only; A2, G2, N1 no Hyperdisk) is refused before the call, naming the
option. Attach waits for its operation at most ``ATTACH_WAIT_S`` (a disk is in its ``users``
only once it is done), then says "not yet" (TransientError), so a slow attach never holds the
daemon's pass; the next call finds it attached. Detach and delete do not wait; a delete of
a disk still attached (or still detaching) is a TransientError ``VolumeInUse``: try again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider.disk_types import DiskTypes
from gpuorch.provider.port import TAG_MANAGED, Volume

from .disks import SIZE_GB, attachable, size_gb
from .errors import operation_error
from .names import (
    disk_name,
    label_filter,
    label_key,
    labels_from_tags,
    last_segment,
    region_of,
    request_id,
    tags_from_labels,
)
from .parse import PROVIDER

if TYPE_CHECKING:
    from .calls import Gce
    from .config import GcpOptions

log = logging.getLogger("gpuorch.gcp")
IN_USE_RETRY_S = 10.0
ATTACH_WAIT_S = 20.0  # an attach takes seconds; longer, and the next pass looks again


def to_volume(d: dict[str, Any]) -> Volume:
    """A disk (``compute_v1.Disk.to_dict``) as a Volume; ``attached_to`` its first user (an instance id)."""
    zone = last_segment(d.get("zone") or "")
    users = [instance_id_of(u) for u in d.get("users") or ()]
    return Volume(id=f"{zone}/{d['name']}", provider=PROVIDER, region=region_of(zone), zone=zone,
                  size_gib=float(d.get("size_gb") or 0), attached_to=users[0] if users else None,
                  tags=tags_from_labels(d.get("labels") or {}))


def instance_id_of(link: str) -> str:
    """``.../zones/us-central1-a/instances/vm-1`` -> ``us-central1-a/vm-1``."""
    parts = link.rstrip("/").split("/")
    return f"{parts[-3]}/{parts[-1]}"


def disk_body(zone: str, size_gib: float, disk_type: str, tags: dict[str, str]) -> dict[str, Any]:
    """The ``disks.insert`` body (pure): a blank disk of ``disk_type``, labelled with ``tags``."""
    return {"name": disk_name(tags), "size_gb": size_gb(disk_type, size_gib),
            "type_": f"zones/{zone}/diskTypes/{disk_type}", "labels": labels_from_tags(tags)}


class PersistentDisks(DiskTypes):
    """Mixed into ``GcpProvider``; see ``gpuorch.provider.port.SupportsVolumes``."""

    options: GcpOptions
    _gce: Gce

    DISK_SIZES = SIZE_GB
    DISK_SIZE_DEFAULT = (1, 65536)
    _attachable = staticmethod(attachable)

    @classmethod
    def _default_disk_type(cls, options: dict[str, Any]) -> str:
        from .config import parse_options

        return parse_options(options).volume_type

    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str],
                      disk_type: str | None = None) -> Volume:
        """A blank disk of ``disk_type`` (default ``volume_type``) in ``zone``, labelled with ``tags``
        and ``gpuorch:managed``. PermanentError ``InvalidVolume.DiskType`` for a type not in disks.py.
        Idempotent by its tags (job, installation): a repeat returns the disk the first call made.
        PermanentError ``InvalidVolume.Size`` outside the type's limits."""
        if not self.options.allows(zone) or region_of(zone) != region:
            raise PermanentError(f"gcp zone {zone} (region {region}) is not in providers.gcp zones/regions",
                                 code="ZoneNotConfigured")
        tags = {**tags, TAG_MANAGED: "true"}
        disk_type = disk_type or self.options.volume_type
        if disk_type not in SIZE_GB:
            raise PermanentError(f"volume.type: {disk_type!r} is not a GCP volume disk type gpuorch knows; use one "
                                 f"of {', '.join(SIZE_GB)}", code="InvalidVolume.DiskType")
        try:
            body = disk_body(zone, size_gib, disk_type, tags)
        except ValueError as e:
            raise PermanentError(str(e), code="InvalidVolume.Size") from None
        try:
            op = self._gce.insert_disk(zone, body, request_id(f"disk:{zone}/{body['name']}"))
            op = self._gce.wait(zone, op, self.options.operation_timeout_s)
            err = operation_error(op, f"gce disks.insert {zone}/{body['name']}")
            if err is not None and err.code not in ("alreadyExists", "RESOURCE_ALREADY_EXISTS"):
                raise err
        except PermanentError as e:
            if e.code not in ("alreadyExists", "409"):
                raise
            log.info("gcp: disk %s/%s exists already: adopting it", zone, body["name"])
        return to_volume(self._gce.get_disk(zone, body["name"]))

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        """Attach read-write with the disk's name as device name; quiet if already attached there.
        PermanentError ``InvalidVolume.ZoneMismatch`` across zones, ``InvalidVolume.DiskType``
        for a machine type that cannot attach the disk's type; TransientError ``VolumeInUse``
        while another instance holds it; NotFoundError if either is gone."""
        zone, name = self._disk_ref(volume_id)
        disk = self._gce.get_disk(zone, name)
        inst_zone, _, inst_name = instance_id.partition("/")
        if not inst_name:
            raise NotFoundError(f"gcp: {instance_id!r} is not an instance id (<zone>/<name>)", code="notFound")
        if inst_zone != zone:
            raise PermanentError(
                f"volume {volume_id} is in {zone}, instance {instance_id} in {inst_zone}: a persistent disk attaches "
                f"only to VMs in its own zone; launch in {zone}", code="InvalidVolume.ZoneMismatch")
        vm = self._gce.get(inst_zone, inst_name)
        holders = [instance_id_of(u) for u in disk.get("users") or ()]
        if instance_id in holders:
            return
        if holders:
            raise TransientError(f"volume {volume_id} is attached to {', '.join(holders)}; detach it first",
                                 code="VolumeInUse", retry_after=IN_USE_RETRY_S)
        disk_type = last_segment(disk.get("type_") or disk.get("type") or "")
        machine = last_segment(vm.get("machine_type") or "")
        if disk_type and disk_type not in attachable(machine):
            raise PermanentError(
                f"providers.gcp.volume_type: {machine} cannot attach a {disk_type} disk (it takes "
                f"{', '.join(sorted(attachable(machine)))}); set volume_type to one of those",
                code="InvalidVolume.DiskType")
        try:
            source = disk.get("self_link") or f"zones/{zone}/disks/{name}"
            op = self._gce.attach_disk(zone, inst_name, {"source": source, "device_name": name, "mode": "READ_WRITE",
                                                          "auto_delete": False})
        except PermanentError as e:
            if e.code == "resourceInUseByAnotherResource":  # attached meanwhile (our own earlier call, still running)
                raise TransientError(str(e), code="VolumeInUse", retry_after=IN_USE_RETRY_S) from None
            raise
        op = self._gce.wait(zone, op, min(self.options.operation_timeout_s, ATTACH_WAIT_S))
        if op.get("status") != "DONE":  # never hold the daemon's pass: the next call finds it attached
            raise TransientError(f"gce instances.attachDisk {name} to {instance_id} still running",
                                 code="NotYet", retry_after=5.0)
        err = operation_error(op, f"gce instances.attachDisk {name} to {instance_id}")
        if err is not None:
            raise err

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        """Detach from ``instance_id``; quiet if not attached there or either is gone. No wait."""
        try:
            zone, name = self._disk_ref(volume_id)
            disk = self._gce.get_disk(zone, name)
        except NotFoundError:
            return
        if instance_id not in {instance_id_of(u) for u in disk.get("users") or ()}:
            return
        inst_zone, _, inst_name = instance_id.partition("/")
        try:
            vm = self._gce.get(inst_zone, inst_name)
            device = next((d.get("device_name") for d in vm.get("disks") or ()
                           if last_segment(d.get("source") or "") == name), name)
            self._gce.detach_disk(inst_zone, inst_name, str(device))
        except NotFoundError:
            return

    def delete_volume(self, volume_id: str) -> None:
        """Delete; quiet if already gone. TransientError ``VolumeInUse`` while attached (detaching
        takes a moment: the reconciler's sweep tries again)."""
        try:
            zone, name = self._disk_ref(volume_id)
            disk = self._gce.get_disk(zone, name)
        except NotFoundError:
            return
        users = [instance_id_of(u) for u in disk.get("users") or ()]
        if users:
            raise TransientError(f"volume {volume_id} is still attached to {', '.join(users)}",
                                 code="VolumeInUse", retry_after=IN_USE_RETRY_S)
        try:
            self._gce.delete_disk(zone, name)
        except NotFoundError:
            return
        except PermanentError as e:
            if e.code == "resourceInUseByAnotherResource":  # attached between our look and the delete
                raise TransientError(str(e), code="VolumeInUse", retry_after=IN_USE_RETRY_S) from None
            raise

    def list_volumes(self) -> list[Volume]:
        """Every disk labelled ``gpuorch-managed=true`` in the configured zones (one aggregated
        listing). Boot disks carry the label too, so only disks named as volumes are listed."""
        disks = self._gce.list_disks(label_filter({label_key(TAG_MANAGED): "true"}))
        return [to_volume(d) for d in disks
                if str(d.get("name", "")).endswith("-vol") and self.options.allows(last_segment(d.get("zone") or ""))]

    def _disk_ref(self, volume_id: str) -> tuple[str, str]:
        zone, _, name = volume_id.partition("/")
        if not name or "/" in name or not self.options.allows(zone):
            raise NotFoundError(f"gcp: {volume_id!r} is not a volume id of providers.gcp (<zone>/<disk>)",
                                code="notFound")
        return zone, name
