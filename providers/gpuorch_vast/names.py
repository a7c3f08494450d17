"""Vast's ``gpu_name`` strings -> gpuorch's GPU names (``gpuorch.gpus``), and the offer classes.

Vast names a card as its hosts' drivers report it ("RTX 4090", "A100 SXM4", "RTX 6000Ada",
"H100 NVL"); memory variants share one name and differ in ``gpu_ram`` (MB), so the A100 and
V100 are told apart by memory. A name missing here, or one the GPU table does not know (yet),
is left out of the offers: gpuorch never rents a card it cannot size. The names are Vast's
``gpu_name`` values as its search filter takes them (``vastai search offers 'gpu_name=RTX_3090_Ti'``,
underscores for spaces). Stdlib only.
"""

from __future__ import annotations

import re

# Vast gpu_name (upper case, no spaces) -> gpuorch name, or (memory GiB threshold, below, at or above).
_NAMES: dict[str, str | tuple[float, str, str]] = {
    "RTX3090": "RTX3090",
    "RTX4090": "RTX4090",
    "RTX5090": "RTX5090",
    "RTX3080": "RTX3080",
    "RTX3090TI": "RTX3090TI",
    "RTX4070": "RTX4070",
    "RTX4080": "RTX4080",
    "RTX5070": "RTX5070",
    "RTX5080": "RTX5080",
    "RTX5000ADA": "RTX5000ADA",
    "RTXPRO6000S": "RTXPRO6000",  # the Server Edition
    "RTXPRO6000WS": "RTXPRO6000",  # the Workstation Edition: the same GB202 board and 96 GB
    "QRTX6000": "QUADRO-RTX6000",
    "A800PCIE": (60, "A800", "A800-80GB"),
    "H200NVL": "H200-NVL",
    "RTXA4000": "RTXA4000",
    "RTXA5000": "RTXA5000",
    "RTXA6000": "RTXA6000",
    "RTX6000ADA": "RTX6000ADA",
    "A10": "A10",
    "A40": "A40",
    "L4": "L4",
    "L40": "L40",
    "L40S": "L40S",
    "TESLAT4": "T4",
    "TESLAV100": (24, "V100", "V100-32GB"),
    "A100SXM4": (60, "A100", "A100-80GB"),
    "A100PCIE": (60, "A100", "A100-PCIE-80GB"),
    "A100X": "A100-PCIE-80GB",  # the converged card: an 80 GB A100 on PCIe
    "H100SXM": "H100",
    "H100PCIE": "H100-PCIE",
    "H100NVL": "H100-NVL",
    "H200": "H200",
    "H200SXM": "H200",
    "B200": "B200",
    "MI300X": "MI300X",
}


def _key(vast_name: str) -> str:
    return re.sub(r"\s+", "", vast_name).upper()


def canonical(vast_name: str, gpu_ram_mb: float) -> str | None:
    """gpuorch's name for a Vast card with ``gpu_ram_mb`` MB per GPU; None if not mapped."""
    entry = _NAMES.get(_key(vast_name))
    if entry is None or isinstance(entry, str):
        return entry
    threshold, below, above = entry
    return above if gpu_ram_mb / 1024 >= threshold else below


def vast_names(gpu: str) -> list[str]:
    """The Vast ``gpu_name`` spellings a gpuorch GPU is searched by (as Vast writes them)."""
    return [SPELLING[k] for k, v in _NAMES.items()
            if v == gpu or (isinstance(v, tuple) and gpu in v[1:])]


# How Vast spells each key (the search filter needs Vast's own string).
SPELLING: dict[str, str] = {
    "RTX3090": "RTX 3090", "RTX4090": "RTX 4090", "RTX5090": "RTX 5090", "RTXA4000": "RTX A4000",
    "RTXA5000": "RTX A5000", "RTXA6000": "RTX A6000", "RTX6000ADA": "RTX 6000Ada", "A10": "A10", "A40": "A40",
    "L4": "L4", "L40": "L40", "L40S": "L40S", "TESLAT4": "Tesla T4", "TESLAV100": "Tesla V100",
    "A100SXM4": "A100 SXM4", "A100PCIE": "A100 PCIE", "A100X": "A100X", "H100SXM": "H100 SXM",
    "H100PCIE": "H100 PCIE", "H100NVL": "H100 NVL", "H200": "H200", "H200SXM": "H200 SXM", "B200": "B200",
    "MI300X": "MI300X", "RTX3080": "RTX 3080", "RTX3090TI": "RTX 3090 Ti", "RTX4070": "RTX 4070", "RTX4080": "RTX 4080",
    "RTX5070": "RTX 5070", "RTX5080": "RTX 5080", "RTX5000ADA": "RTX 5000Ada", "RTXPRO6000S": "RTX PRO 6000 S",
    "RTXPRO6000WS": "RTX PRO 6000 WS", "QRTX6000": "Q RTX 6000", "A800PCIE": "A800 PCIE", "H200NVL": "H200 NVL",
}
assert set(SPELLING) == set(_NAMES)


def instance_type(gpu: str, count: int) -> str:
    """The offer class's name: ``RTX4090x2`` (GPU model x count; the region is the offer's)."""
    return f"{gpu}x{count}"


_TYPE = re.compile(r"(?P<gpu>.+)x(?P<count>[1-9][0-9]?)")


def parse_instance_type(name: str) -> tuple[str, int] | None:
    m = _TYPE.fullmatch(name)
    return (m["gpu"], int(m["count"])) if m else None
