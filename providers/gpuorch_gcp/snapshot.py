"""Build GCP's shipped rows (``data/offers.csv``) from public list prices, offline.

    python -m gpuorch.catalog.snapshot DATA_DIR

``DATA_DIR`` holds ``catalog-sample/gcp-gpu-offers.csv`` (public on-demand and spot prices per
zone, host machines and GPUs priced apart). Rows failing the row audit (the core runs it) or the
part check here are written to ``data/dropped.csv`` with the reason. Provenance, choices and gaps:
docs/catalog.md. The daemon never runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuorch.provider.catalog import Dropped, OfferRow, gpu_memory_mib, part_findings, price_or_none

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


def gcp_rows(path: Path, machines: dict[str, tuple[str, int]] = GCP_MACHINE_GPUS) -> list[OfferRow | Dropped]:
    """One row per (machine type, zone): host + GPUs, on demand and spot. A row whose parts do not
    add up to one market (a part's spot above its own on-demand price: the source's GPU SKU is
    not the one the VM bills) is returned as ``Dropped``, with the values, not shipped."""
    rule = CATALOG.billing
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    gpu_prices = {
        (r["AvailabilityZone"], r["AcceleratorName"], int(r["AcceleratorCount"])): r
        for r in raw if not r["InstanceType"]
    }
    out: list[OfferRow | Dropped] = []
    for host in (r for r in raw if r["InstanceType"] in machines):
        name, count = machines[host["InstanceType"]]
        acc = gpu_prices.get((host["AvailabilityZone"], name, count))
        if acc is None:
            continue  # no GPU price in this zone: the VM's price is unknown
        host_spot, acc_spot = price_or_none(host["SpotPrice"]), price_or_none(acc["SpotPrice"])
        spot = host_spot + acc_spot if host_spot is not None and acc_spot is not None else None
        row = OfferRow(
            "gcp", host["Region"], host["AvailabilityZone"], host["InstanceType"], name, count,
            gpu_memory_mib(acc["GpuInfo"]) / 1024, float(host["vCPUs"]), float(host["MemoryGiB"]),
            round(float(host["Price"]) + float(acc["Price"]), 6), round(spot, 6) if spot is not None else None,
            rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(host["InstanceType"], count), None,
        )  # fmt: skip
        wrong = part_findings([(f"host {host['InstanceType']}", float(host["Price"]), host_spot),
                               (f"{count} x {name} GPU", float(acc["Price"]), acc_spot)])
        out.append(Dropped(row, "part", "; ".join(wrong)) if wrong else row)
    return out


def build(data_dir: Path) -> list[OfferRow | Dropped]:
    return gcp_rows(data_dir / "catalog-sample" / "gcp-gpu-offers.csv")
