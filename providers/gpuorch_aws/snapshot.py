"""Build AWS's shipped rows (``data/offers.csv``) from public list prices, offline.

    python -m gpuorch.catalog.snapshot DATA_DIR

``DATA_DIR`` holds ``catalog-sample/aws-gpu-offers.csv`` (public on-demand and spot prices per
zone) and ``spot-advisor/gpu_accel_pools.csv`` (interruption buckets). Rows failing the row
audit (the core runs it) are written to ``data/dropped.csv`` with the reason. Provenance, choices
and gaps: docs/catalog.md. The daemon never runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuorch.provider import gpus
from gpuorch.provider.catalog import MIN_SPOT_FRACTION, OfferRow, gpu_memory_mib, price_or_none

from .catalog import CATALOG


def advisor_buckets(path: Path) -> dict[tuple[str, str], str]:
    with path.open(newline="") as f:
        return {(r["region"], r["instance_type"]): r["interruption_bucket"]
                for r in csv.DictReader(f) if r["os"] == "Linux"}


def plausible_spot(on_demand: float, spot: float | None) -> float | None:
    """The slice's spot price, or None (no spot offering) where it cannot be one: at or above
    the on-demand price, to the slice's 4 decimals (EC2 caps spot at on-demand, so a price at the
    cap saves nothing and marks a pool without spare capacity), or below 10% of on-demand (``audit.MIN_SPOT_FRACTION``:
    no source shows an EC2 GPU pool that cheap; the row audit would flag it)."""
    # The slice rounds spot to 4 decimals: a price equal to on-demand at that precision is at the cap.
    if spot is None or round(spot, 4) >= round(on_demand, 4) or spot < MIN_SPOT_FRACTION * on_demand:
        return None
    return spot


def aws_rows(path: Path, buckets: dict[tuple[str, str], str]) -> list[OfferRow]:
    rule = CATALOG.billing
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            spec = gpus.lookup(r["AcceleratorName"])
            assert spec is not None, r["AcceleratorName"]
            count = int(float(r["AcceleratorCount"]))
            out.append(OfferRow(
                "aws", r["Region"], r["AvailabilityZone"], r["InstanceType"], spec.name, count,
                gpu_memory_mib(r["GpuInfo"]) / 1024, float(r["vCPUs"]), float(r["MemoryGiB"]),
                float(r["Price"]), plausible_spot(float(r["Price"]), price_or_none(r["SpotPrice"])),
                rule.increment_s, rule.minimum_s,
                CATALOG.interconnect_for(r["InstanceType"], count), buckets.get((r["Region"], r["InstanceType"])),
            ))  # fmt: skip
    return out


def build(data_dir: Path) -> list[OfferRow]:
    buckets = advisor_buckets(data_dir / "spot-advisor" / "gpu_accel_pools.csv")
    return aws_rows(data_dir / "catalog-sample" / "aws-gpu-offers.csv", buckets)
