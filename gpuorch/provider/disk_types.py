"""What ``SupportsVolumes`` is asked about disk types before any provider is built (a job's
``volume.type``, its size limits, whether a machine type attaches it), answered from an
adapter's table: one implementation for the adapters whose disks come in several types."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar, Protocol


class _VolumeTypeOption(Protocol):
    @property
    def volume_type(self) -> str: ...


class DiskTypes:
    """Mixed into an adapter's volumes mixin, which sets ``DISK_SIZES`` (type -> (min, max) GiB,
    the default type among them), ``DISK_SIZE_DEFAULT`` (the limits of a type it does not know),
    ``_default_disk_type`` (its options' ``volume_type``) and ``_attachable`` (the types a machine
    type attaches). No call to the cloud."""

    DISK_SIZES: ClassVar[Mapping[str, tuple[int, int]]]
    DISK_SIZE_DEFAULT: ClassVar[tuple[int, int]]
    options: _VolumeTypeOption

    @classmethod
    def _default_disk_type(cls, options: dict[str, Any]) -> str:
        raise NotImplementedError

    @staticmethod
    def _attachable(instance_type: str, /) -> Collection[str]:
        raise NotImplementedError

    @classmethod
    def volume_types(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """The disk types a job's ``volume.type`` may name here, ``volume_type`` (the default) first."""
        default = cls._default_disk_type(options)
        return (default, *(t for t in cls.DISK_SIZES if t != default))

    @classmethod
    def volume_size_range(cls, options: dict[str, Any], disk_type: str | None = None) -> tuple[int, int]:
        """GiB a volume of ``disk_type`` (default: ``volume_type``) may have."""
        return cls.DISK_SIZES.get(disk_type or cls.volume_types(options)[0], cls.DISK_SIZE_DEFAULT)

    @classmethod
    def volume_attachable(cls, options: dict[str, Any], instance_type: str, disk_type: str | None = None) -> bool:
        """Whether ``instance_type`` can attach ``disk_type`` (default: ``volume_type``)."""
        return (disk_type or cls.volume_types(options)[0]) in cls._attachable(instance_type)

    def can_attach_volume(self, instance_type: str, disk_type: str | None = None) -> bool:
        """The same for this provider's options (the daemon's placement of volume jobs)."""
        return (disk_type or self.options.volume_type) in self._attachable(instance_type)
