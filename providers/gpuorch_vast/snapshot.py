"""Build Vast's shipped rows (``data/offers.csv``) from ``data/sources/vast-marketplace.csv``, offline.

    python -m gpuorch.catalog.snapshot DATA_DIR

Provenance per row (source page, month) is in the sources file; the rule applied here is the live
offers' own: the expected price of a host at the default minimum reliability (``market.expected``).
The daemon never runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuorch.provider import gpus
from gpuorch.provider.catalog import OfferRow, price_or_none

from .catalog import CATALOG, CPU_PER_GPU, RAM_GIB_PER_GPU
from .names import canonical, instance_type

SOURCES = Path(__file__).resolve().parent / "data" / "sources" / "vast-marketplace.csv"
DEFAULT_MIN_RELIABILITY = 0.95  # config.VastOptions.min_reliability's default (stdlib-only here)


def build(data_dir: Path) -> list[OfferRow]:
    """Rows from the committed slice (``data_dir`` is not read: the slice ships with the adapter)."""
    rule = CATALOG.billing
    out = []
    with SOURCES.open(newline="") as f:
        for r in csv.DictReader(f):
            name = canonical(r["vast_gpu_name"], float(r["gpu_ram_gb"]) * 1024)
            spec = gpus.lookup(name or "")
            if spec is None:  # a card the GPU table does not know (yet): left out
                continue
            count = int(r["num_gpus"])
            spot = price_or_none(r["interruptible_usd_per_hour"])
            out.append(OfferRow(
                "vast", "global", "global", instance_type(spec.name, count), spec.name, count, spec.usable,
                CPU_PER_GPU * count, RAM_GIB_PER_GPU * count,
                round(float(r["on_demand_usd_per_hour"]) / DEFAULT_MIN_RELIABILITY, 4),
                None if spot is None else round(spot / DEFAULT_MIN_RELIABILITY, 4),
                rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(instance_type(spec.name, count), count),
                None,
            ))  # fmt: skip
    return out
