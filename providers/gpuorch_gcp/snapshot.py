"""Build GCP's shipped rows (``data/offers.csv``) from public list prices, offline.

    python -m gpuorch.catalog.snapshot DATA_DIR

``DATA_DIR`` holds ``catalog-sample/gcp-gpu-offers.csv`` (public on-demand and spot prices per
zone, host machines and GPUs priced apart). Provenance, choices and gaps: docs/catalog.md. The
daemon never runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuorch.provider.catalog import OfferRow, gpu_memory_mib, price_or_none

from .catalog import CATALOG

# GCP bills a GPU VM as host machine + attached GPUs; these machine types come with GPUs.
GCP_MACHINE_GPUS = {
    "a2-highgpu-1g": ("A100", 1),
    "a2-ultragpu-1g": ("A100-80GB", 1),
    "a3-highgpu-1g": ("H100", 1),
    "a3-highgpu-8g": ("H100", 8),
    "a3-megagpu-8g": ("H100", 8),  # the slice prices its GPUs like a3-highgpu's H100 rows
    "g2-standard-4": ("L4", 1),
    "g2-standard-8": ("L4", 1),
}


def gcp_rows(path: Path) -> list[OfferRow]:
    rule = CATALOG.billing
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    gpu_prices = {
        (r["AvailabilityZone"], r["AcceleratorName"], int(r["AcceleratorCount"])): r
        for r in raw if not r["InstanceType"]
    }
    out = []
    for host in (r for r in raw if r["InstanceType"] in GCP_MACHINE_GPUS):
        name, count = GCP_MACHINE_GPUS[host["InstanceType"]]
        acc = gpu_prices.get((host["AvailabilityZone"], name, count))
        if acc is None:
            continue  # no GPU price in this zone: the VM's price is unknown
        host_spot, acc_spot = price_or_none(host["SpotPrice"]), price_or_none(acc["SpotPrice"])
        spot = host_spot + acc_spot if host_spot is not None and acc_spot is not None else None
        out.append(OfferRow(
            "gcp", host["Region"], host["AvailabilityZone"], host["InstanceType"], name, count,
            gpu_memory_mib(acc["GpuInfo"]) / 1024, float(host["vCPUs"]), float(host["MemoryGiB"]),
            round(float(host["Price"]) + float(acc["Price"]), 6), round(spot, 6) if spot is not None else None,
            rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(host["InstanceType"], count), None,
        ))  # fmt: skip
    return out


def build(data_dir: Path) -> list[OfferRow]:
    return gcp_rows(data_dir / "catalog-sample" / "gcp-gpu-offers.csv")
