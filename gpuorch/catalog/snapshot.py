"""Build the shipped snapshot (gpuorch/data/offers.csv) from public list prices.

    python -m gpuorch.catalog.snapshot DATA_DIR > gpuorch/data/offers.csv

``DATA_DIR`` holds ``catalog-sample/{aws,gcp}-gpu-offers.csv`` (public on-demand and spot prices
per zone) and ``spot-advisor/gpu_accel_pools.csv`` (AWS interruption buckets). The Azure slice,
``sources/azure-vms.csv`` next to this module, is committed with the code: rows copied unchanged
from a public price catalog (provenance in ``sources/README.md``). Provenance, choices and gaps
are documented in docs/catalog.md. Offline only; the daemon never runs this.
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

from gpuorch.money import billing
from gpuorch import gpus
from gpuorch.catalog.families import family_of, interconnect_for
from gpuorch.catalog.rows import OfferRow, write_csv

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

AZURE_SLICE = Path(__file__).resolve().parent / "sources" / "azure-vms.csv"
# Known errors of the Azure source, corrected here rather than in the copied rows:
# it lists Standard_ND96isr_H100_v5 with 12 GPUs; Azure's ND H100 v5 page says 8 H100 per VM.
AZURE_GPU_COUNT = {"Standard_ND96isr_H100_v5": 8}


def _float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _gpu_mib(info: str) -> float:
    return float(ast.literal_eval(info)["Gpus"][0]["MemoryInfo"]["SizeInMiB"])


def advisor_buckets(path: Path) -> dict[tuple[str, str], str]:
    with path.open(newline="") as f:
        return {(r["region"], r["instance_type"]): r["interruption_bucket"] for r in csv.DictReader(f) if r["os"] == "Linux"}


def aws_rows(path: Path, buckets: dict[tuple[str, str], str]) -> list[OfferRow]:
    rule = billing.RULES["aws"]
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            spec = gpus.lookup(r["AcceleratorName"])
            assert spec is not None, r["AcceleratorName"]
            count = int(float(r["AcceleratorCount"]))
            out.append(OfferRow(
                "aws", r["Region"], r["AvailabilityZone"], r["InstanceType"], spec.name, count,
                _gpu_mib(r["GpuInfo"]) / 1024, float(r["vCPUs"]), float(r["MemoryGiB"]),
                float(r["Price"]), _float(r["SpotPrice"]), rule.increment_s, rule.minimum_s,
                interconnect_for("aws", r["InstanceType"], count), buckets.get((r["Region"], r["InstanceType"])),
            ))  # fmt: skip
    return out


def gcp_rows(path: Path) -> list[OfferRow]:
    rule = billing.RULES["gcp"]
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    gpu_prices = {
        (r["AvailabilityZone"], r["AcceleratorName"], int(r["AcceleratorCount"])): r for r in raw if not r["InstanceType"]
    }
    out = []
    for host in (r for r in raw if r["InstanceType"] in GCP_MACHINE_GPUS):
        name, count = GCP_MACHINE_GPUS[host["InstanceType"]]
        acc = gpu_prices.get((host["AvailabilityZone"], name, count))
        if acc is None:
            continue  # no GPU price in this zone: the VM's price is unknown
        host_spot, acc_spot = _float(host["SpotPrice"]), _float(acc["SpotPrice"])
        spot = host_spot + acc_spot if host_spot is not None and acc_spot is not None else None
        out.append(OfferRow(
            "gcp", host["Region"], host["AvailabilityZone"], host["InstanceType"], name, count,
            _gpu_mib(acc["GpuInfo"]) / 1024, float(host["vCPUs"]), float(host["MemoryGiB"]),
            round(float(host["Price"]) + float(acc["Price"]), 6), round(spot, 6) if spot is not None else None,
            rule.increment_s, rule.minimum_s, interconnect_for("gcp", host["InstanceType"], count), None,
        ))  # fmt: skip
    return out


def azure_rows(path: Path) -> list[OfferRow]:
    """One row per (VM size, region); Azure prices a VM size per region, so the zone is the region.

    The GPU is the instance family's (``families.py``): the source calls the H100 NVL of the
    NC H100 v5 sizes "H100", gpuorch files it as H100-PCIE. GPU memory is the GPU table's usable
    memory (the source has none). A spot price equal to the on-demand price (the source's H100 v5
    rows) is read as "no spot price published" and left out."""
    rule = billing.RULES["azure"]
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            family = family_of("azure", r["InstanceType"])
            assert family is not None, r["InstanceType"]
            spec = gpus.lookup(family.gpu)
            assert spec is not None and gpus.family(spec.name) == gpus.family(gpus.lookup(r["AcceleratorName"]).name)
            count = AZURE_GPU_COUNT.get(r["InstanceType"], int(float(r["AcceleratorCount"])))
            assert 1 <= count <= family.max_gpus, r
            price, spot = float(r["Price"]), _float(r["SpotPrice"])
            out.append(OfferRow(
                "azure", r["Region"], r["Region"], r["InstanceType"], spec.name, count, spec.usable,
                float(r["vCPUs"]), float(r["MemoryGiB"]), price, spot if spot is not None and spot < price else None,
                rule.increment_s, rule.minimum_s, interconnect_for("azure", r["InstanceType"], count), None,
            ))  # fmt: skip
    return out


def build(data_dir: Path, azure: Path = AZURE_SLICE) -> list[OfferRow]:
    buckets = advisor_buckets(data_dir / "spot-advisor" / "gpu_accel_pools.csv")
    rows = aws_rows(data_dir / "catalog-sample" / "aws-gpu-offers.csv", buckets)
    rows += gcp_rows(data_dir / "catalog-sample" / "gcp-gpu-offers.csv")
    rows += azure_rows(azure)
    return sorted(rows, key=lambda r: (r.provider, r.instance_type, r.region, r.zone))


if __name__ == "__main__":
    write_csv(build(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")), sys.stdout)
