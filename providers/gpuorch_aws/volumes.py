"""EBS volumes (``SupportsVolumes``): gp3, tagged, and attached only inside their own zone.

An EBS volume lives in one availability zone and attaches only to instances there. EC2 refuses a
cross-zone attach with ``InvalidVolume.ZoneMismatch``; moto does not, so the check is made here,
before the call, with a message that says what to do. Reuse across attempts is the daemon's:
it finds a job's volume by its ``gpuorch:job`` tag in ``list_volumes`` and places the next
attempt in that volume's zone (docs/aws.md, "Volumes").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider.port import TAG_JOB, TAG_OWNER, Volume

from .calls import Ec2
from .config import AwsOptions
from .parse import to_volume
from .requests import create_volume_kwargs, free_device, is_root_volume, managed_filters

T = TypeVar("T")

IN_USE_RETRY_S = 10.0
_ALREADY_DETACHED = ("IncorrectState", "InvalidAttachment.NotFound")


class EbsVolumes:
    """Mixed into ``AwsProvider``; see ``gpuorch.provider.port.SupportsVolumes``."""

    # What the mixin uses of AwsProvider.
    options: AwsOptions
    _ec2: Ec2
    _where: dict[str, str]
    if TYPE_CHECKING:
        def _check_region(self, region: str) -> None: ...
        def _zone(self, region: str, zone: str) -> str: ...
        def _find(self, resource_id: str, lookup: Callable[[str], list[T]]) -> tuple[str, T]: ...
        def _describe_instance(self, instance_id: str) -> tuple[str, dict[str, Any]]: ...

    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str]) -> Volume:
        """A gp3 volume of ``size_gib`` (rounded up to whole GiB) in ``zone``, carrying ``tags`` and
        ``gpuorch:managed``. Idempotent by the tags' job and owner: a volume of theirs in ``zone``
        (a create repeated after a crash) is returned instead of a second one."""
        self._check_region(region)
        zone = self._zone(region, zone)
        filters = [*managed_filters(), {"Name": "availability-zone", "Values": [zone]}]
        filters += [{"Name": f"tag:{k}", "Values": [tags[k]]} for k in (TAG_JOB, TAG_OWNER) if tags.get(k)]
        for v in self._ec2.pages(region, "describe_volumes", "Volumes", Filters=filters):
            found = to_volume(v, region)
            if not is_root_volume(v) and all(found.tags.get(k) == tags.get(k) for k in (TAG_JOB, TAG_OWNER)):
                self._where[v["VolumeId"]] = region
                return found
        resp = self._ec2.call(region, "create_volume", **create_volume_kwargs(zone, size_gib, tags))
        self._where[resp["VolumeId"]] = region
        return to_volume(resp, region)

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        """Attach at the first free ``/dev/sd[f-p]``. Quiet if already attached to this instance.

        PermanentError ``InvalidVolume.ZoneMismatch`` if the two are in different zones (or
        regions); TransientError ``VolumeInUse`` (a not-yet) if the volume is attached elsewhere;
        NotFoundError if either is gone.
        """
        vol_region, vol = self._describe_volume(volume_id)
        inst_region, inst = self._describe_instance(instance_id)
        vol_zone, inst_zone = vol["AvailabilityZone"], inst["Placement"]["AvailabilityZone"]
        if (vol_region, vol_zone) != (inst_region, inst_zone):
            raise PermanentError(
                f"volume {volume_id} is in {vol_zone}, instance {instance_id} in {inst_zone}: an EBS volume attaches "
                f"only to instances in its own zone; launch in {vol_zone}, or snapshot the volume and restore it "
                f"in {inst_zone}", code="InvalidVolume.ZoneMismatch")
        holders = {a["InstanceId"] for a in vol.get("Attachments") or () if a.get("State") in ("attaching", "attached")}
        if instance_id in holders:
            return
        if holders:
            raise TransientError(f"volume {volume_id} is attached to {', '.join(sorted(holders))}; detach it first",
                                 code="VolumeInUse", retry_after=IN_USE_RETRY_S)
        try:
            device = free_device(inst)
        except ValueError as e:
            raise PermanentError(str(e), code="NoFreeDevice") from None
        self._ec2.call(vol_region, "attach_volume", VolumeId=volume_id, InstanceId=instance_id, Device=device)

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        """Detach from ``instance_id``; quiet if it is not attached there (or the volume is gone).
        Returns without waiting for the detachment to finish."""
        try:
            region, vol = self._describe_volume(volume_id)
        except NotFoundError:
            return
        if not any(a["InstanceId"] == instance_id for a in vol.get("Attachments") or ()):
            return
        try:  # InstanceId given on purpose: moto crashes without it, and it names the intent
            self._ec2.call(region, "detach_volume", VolumeId=volume_id, InstanceId=instance_id)
        except (PermanentError, NotFoundError) as e:
            if e.code not in _ALREADY_DETACHED and e.code != "InvalidVolume.NotFound":
                raise

    def delete_volume(self, volume_id: str) -> None:
        """Delete; quiet if already gone. TransientError ``VolumeInUse`` (a not-yet) while attached."""
        try:
            region, _ = self._describe_volume(volume_id)
            self._ec2.call(region, "delete_volume", VolumeId=volume_id)
        except NotFoundError:
            return
        except PermanentError as e:  # EC2's VolumeInUse is a client error; here it means "not yet"
            if e.code != "VolumeInUse":
                raise
            raise TransientError(str(e), code="VolumeInUse", retry_after=IN_USE_RETRY_S) from None

    def list_volumes(self) -> list[Volume]:
        """Every volume tagged ``gpuorch:managed=true`` in the configured regions, except the root
        volumes of instances (they go with their instance)."""
        out = []
        for region in self.options.regions:
            for v in self._ec2.pages(region, "describe_volumes", "Volumes", Filters=managed_filters()):
                if not is_root_volume(v):
                    self._where[v["VolumeId"]] = region
                    out.append(to_volume(v, region))
        return out

    def _describe_volume(self, volume_id: str) -> tuple[str, dict[str, Any]]:
        return self._find(volume_id, lambda r: self._ec2.call(r, "describe_volumes", VolumeIds=[volume_id])["Volumes"])
