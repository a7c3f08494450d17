"""Managed disk rules of Azure: the volume disk types, their sizes, and which VM sizes attach
them. Pure and stdlib-only (config validation and tests use it without the SDK).

Premium SSD (``Premium_LRS``, the default) attaches only to sizes with premium storage, which
Azure's size names say with the ``s`` among the letters after the vCPU count
(``Standard_NC24ads_A100_v4``: a, d, s); Standard SSD (``StandardSSD_LRS``) attaches to every
size. Both are 4 to 32,767 GiB (Azure's managed disk limits; sizes bill by tier).
"""

from __future__ import annotations

import math
import re

DEFAULT_TYPE = "Premium_LRS"
SIZE_GIB: dict[str, tuple[int, int]] = {"Premium_LRS": (4, 32767), "StandardSSD_LRS": (4, 32767)}
_FEATURES = re.compile(r"Standard_[A-Z]+\d+(?P<features>[a-z]*)", re.IGNORECASE)


def attachable(vm_size: str) -> frozenset[str]:
    """The volume disk types a VM size can attach (from the size's name; see the module doc)."""
    m = _FEATURES.match(vm_size)
    if m is None:
        return frozenset(SIZE_GIB)  # a name of no known shape: ARM has the last word
    return frozenset(SIZE_GIB) if "s" in m["features"] else frozenset({"StandardSSD_LRS"})


def size_gib(disk_type: str, size: float) -> int:
    """Whole GiB of at least ``size``; ValueError outside the type's limits, naming them."""
    lo, hi = SIZE_GIB[disk_type]
    n = max(1, math.ceil(size))
    if not lo <= n <= hi:
        raise ValueError(f"volume.size: {size:g} GiB is outside what an Azure {disk_type} disk can be "
                         f"({lo} to {hi} GiB); choose a size in that range")
    return n
