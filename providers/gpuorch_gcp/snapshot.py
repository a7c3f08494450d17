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


def gcp_rows(path: Path, machines: dict[str, tuple[str, int]] = GCP_MACHINE_GPUS) -> list[OfferRow]:
    rule = CATALOG.billing
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    gpu_prices = {
        (r["AvailabilityZone"], r["AcceleratorName"], int(r["AcceleratorCount"])): r
        for r in raw if not r["InstanceType"]
    }
    out = []
    for host in (r for r in raw if r["InstanceType"] in machines):
        name, count = machines[host["InstanceType"]]
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


# H200 offers (a3-ultragpu-8g), not in the shared slice: rows copied unchanged from a public price
# catalog, committed with the adapter (provenance in data/sources/README.md).
H200_SLICE = Path(__file__).resolve().parent / "data" / "sources" / "gcp-vms-h200.csv"
# The slice lists the 8 x H200 on-demand at 36.60258 here, half its 74.49392 in the other zones, and
# where it also lists a spot price that is above it: not a credible on-demand price, so left out.
H200_DOUBTFUL_ZONES = frozenset({"asia-south1-b", "asia-south2-c", "europe-west1-b", "europe-west4-a",
                                 "us-east5-a", "us-south1-b"})


def h200_rows() -> list[OfferRow]:
    rows = gcp_rows(H200_SLICE, {"a3-ultragpu-8g": ("H200", 8)})
    return [r for r in rows if r.zone not in H200_DOUBTFUL_ZONES]


def build(data_dir: Path) -> list[OfferRow]:
    return gcp_rows(data_dir / "catalog-sample" / "gcp-gpu-offers.csv") + h200_rows()
