"""Persistent disk rules of Compute Engine: types, sizes, and which GPU machine series attach
which type. Pure and stdlib-only (config validation and tests use it without the SDK).

From the Compute Engine machine-series pages ("Supported disk types", accelerator-optimized and
N1): A4, A4X and A3 Ultra attach Hyperdisk only; A3 High/Mega/Edge attach Persistent Disk and
Hyperdisk Balanced; A2, G2 and N1 attach Persistent Disk but not Hyperdisk Balanced. Sizes (GB):
pd-balanced and pd-ssd 10 to 65,536; hyperdisk-balanced 4 to 65,536.
"""

from __future__ import annotations

import math
import re

DEFAULT_TYPE = "pd-balanced"
SIZE_GB: dict[str, tuple[int, int]] = {
    "pd-balanced": (10, 65536),
    "pd-ssd": (10, 65536),
    "hyperdisk-balanced": (4, 65536),
}
_PD, _HD = frozenset({"pd-balanced", "pd-ssd"}), frozenset({"hyperdisk-balanced"})
# (machine-type prefix, the volume types it attaches); the first match wins.
_SUPPORT: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"(a4x?|a3-ultragpu)-"), _HD),
    (re.compile(r"a3-"), _PD | _HD),
    (re.compile(r"(a2|g2|n1)-"), _PD),
)


def attachable(machine_type: str) -> frozenset[str]:
    """The volume types ``machine_type`` can attach (every known type for an unknown series:
    GCE itself then has the last word)."""
    for pattern, types in _SUPPORT:
        if pattern.match(machine_type):
            return types
    return frozenset(SIZE_GB)


def size_gb(disk_type: str, size_gib: float) -> int:
    """Whole GB of at least ``size_gib`` (GCE sizes disks in GB, meaning GiB); ValueError outside
    the type's limits, naming them."""
    lo, hi = SIZE_GB[disk_type]
    size = max(1, math.ceil(size_gib))
    if not lo <= size <= hi:
        raise ValueError(f"volume.size: {size_gib:g} GiB is outside what a GCP {disk_type} disk can be "
                         f"({lo} to {hi} GiB); choose a size in that range")
    return size
