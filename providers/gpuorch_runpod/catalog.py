"""RunPod's catalog: GPU type ids, shipped rows (``data/offers.csv``) and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without pydantic or
an HTTP client). Billing: "All compute and storage charges are billed per second, with no fees
for data transfer" (https://docs.runpod.io/accounts-billing/billing); no minimum is published.
Storage while it exists: network volumes $0.07/GB/month under 1 TB, $0.05 above
(https://docs.runpod.io/serverless/pricing, "What you're billed for").

Regions are RunPod's two clouds, ``secure`` (RunPod's data centers) and ``community`` (vetted
hosts): ``cloudType`` of the pod mutations (https://docs.runpod.io/sdks/graphql/manage-pods).
RunPod picks the data center inside a cloud; ``providers.runpod.data_center`` pins one.
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family

PROVIDER = "runpod"
CLOUDS = ("secure", "community")
# RunPod ``gpuTypeId`` -> the gpuorch GPU name (gpuorch.gpus). The ids are RunPod's own
# (https://docs.runpod.io/references/gpu-types); a type not listed here is not offered.
GPU_TYPES: dict[str, str] = {
    "NVIDIA GeForce RTX 3090": "RTX3090",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "NVIDIA GeForce RTX 5090": "RTX5090",
    "NVIDIA GeForce RTX 3080": "RTX3080",
    "NVIDIA GeForce RTX 3090 Ti": "RTX3090TI",
    "NVIDIA GeForce RTX 4080": "RTX4080",
    "NVIDIA GeForce RTX 5080": "RTX5080",
    "NVIDIA RTX 4000 Ada Generation": "RTX4000ADA",
    "NVIDIA RTX 5000 Ada Generation": "RTX5000ADA",
    "NVIDIA RTX A4000": "RTXA4000",
    "NVIDIA RTX A5000": "RTXA5000",
    "NVIDIA RTX A6000": "RTXA6000",
    "NVIDIA RTX 6000 Ada Generation": "RTX6000ADA",
    "NVIDIA L4": "L4",
    "NVIDIA L40": "L40",
    "NVIDIA L40S": "L40S",
    "NVIDIA A40": "A40",
    "NVIDIA A100 80GB PCIe": "A100-PCIE-80GB",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA H100 PCIe": "H100-PCIE",
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200",
    "NVIDIA B200": "B200",
    "AMD Instinct MI300X OAM": "MI300X",
}
GPU_IDS: dict[str, str] = {name: gpu_id for gpu_id, name in GPU_TYPES.items()}
COUNTS = (1, 2, 4, 8)  # GPUs per pod offered (up to the type's maxGpuCount)


def instance_type(gpu: str, count: int) -> str:
    """``rtx4090.1``, ``h100.8``: a pod of ``count`` GPUs of one type."""
    return f"{gpu.lower()}.{count}"


def parse_instance_type(text: str) -> tuple[str, str, int] | None:
    """(RunPod gpuTypeId, gpuorch name, count) of an ``instance_type``; None if not one of ours."""
    slug, _, count = text.rpartition(".")
    name = next((n for n in GPU_IDS if n.lower() == slug), None)
    if name is None or not count.isdigit() or int(count) not in COUNTS:
        return None
    return GPU_IDS[name], name, int(count)


# Pods are one machine: a family says how its GPUs talk. SXM and OAM boards carry NVLink/Infinity
# Fabric; the PCIe and consumer cards have none (RunPod's GPU type pages).
_LINKS = {"A100-80GB": "nvlink", "H100": "nvlink", "H200": "nvlink", "B200": "nvlink", "MI300X": "infinity-fabric"}
FAMILIES: tuple[Family, ...] = tuple(
    Family(PROVIDER, rf"{name.lower()}\.", name, 8, _LINKS.get(name, "pcie"), 0) for name in GPU_IDS)

CATALOG = AdapterCatalog(
    provider=PROVIDER, billing=BillingRule(1, 0), families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv",
    storage_usd_per_gib_month=0.07,  # network volumes under 1 TB (module docstring)
)
