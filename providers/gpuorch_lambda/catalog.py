"""Lambda's catalog: shipped rows (``data/offers.csv``), instance families, billing rule, and how
an instance type's name reads as GPUs.

Stdlib-only (entry point ``gpuorch.catalogs``). Billing (https://docs.lambda.ai/public-cloud/billing,
"On-Demand Cloud (ODC) instances"): priced per hour, billed in one-minute increments from the
moment the instance passes its health checks until it is terminated; no longer minimum is
stated, so one increment. Filesystems bill per GiB-month in one-hour increments while they exist.
Lambda sells no spot or interruptible instances: every row is on-demand (``spot_price_per_hour``
empty).

Instance type names are ``gpu_<count>x_<model>`` (``gpu_8x_h100_sxm5``); ``GPU_MODELS`` maps the
model part to the GPU table's name (``rtx6000`` is the Turing Quadro RTX 6000); types whose GPU
the table lacks are not offered.

The shipped rows' prices: a ``source`` page and ``as_of`` date per row, and a ``provenance`` column.
None has a first-party source (no copy of Lambda's pricing page or of an instance-types answer was
found, docs/lambda.md): each row says so, third-party (a dated page quoting Lambda's price) or
indicative (transcribed without a fetched copy of the pricing page); ``catalog refresh`` replaces
both with the API's.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family

PROVIDER = "lambda"
BILLING = BillingRule(60, 60)
PRICING_PAGE = "https://lambda.ai/pricing"
INSTANCE_TYPES_API = "https://cloud.lambdalabs.com/api/v1/instance-types"

# Lambda's model part of an instance type name -> the GPU table's name (gpuorch.gpus).
GPU_MODELS: dict[str, str] = {
    "b200_sxm6": "B200",
    "h100_sxm5": "H100",
    "h100_pcie": "H100-PCIE",
    "gh200": "GH200",
    "a100_80gb_sxm4": "A100-80GB",
    "a100_sxm4": "A100",
    "a100": "A100",  # 1x: 40 GB PCIe; 8x: 40 GB SXM4 (the description says which)
    "a10": "A10",
    "a6000": "RTXA6000",
    "v100": "V100",
    "rtx6000": "QUADRO-RTX6000",
}
_TYPE = re.compile(r"gpu_(\d{1,2})x_([a-z0-9_]+)")

# fmt: off
# Links inside a node, from the instance descriptions (SXM parts on NVLink/NVSwitch). On-demand
# instances are single nodes on Ethernet (InfiniBand is for 1-Click Clusters only).
FAMILIES: tuple[Family, ...] = (
    Family(PROVIDER, r"gpu_\d+x_b200_sxm6$", "B200", 8, "nvlink", 100),
    Family(PROVIDER, r"gpu_\d+x_h100_sxm5$", "H100", 8, "nvlink", 100),
    Family(PROVIDER, r"gpu_\d+x_h100_pcie$", "H100-PCIE", 1, "pcie", 25),
    Family(PROVIDER, r"gpu_\d+x_gh200$", "GH200", 1, "nvlink", 25),
    Family(PROVIDER, r"gpu_\d+x_a100_80gb_sxm4$", "A100-80GB", 8, "nvlink", 100),
    Family(PROVIDER, r"gpu_\d+x_a100(_sxm4)?$", "A100", 8, "nvlink", 100),
    Family(PROVIDER, r"gpu_\d+x_a10$", "A10", 1, "pcie", 25),
    Family(PROVIDER, r"gpu_\d+x_a6000$", "RTXA6000", 4, "pcie", 25),
    Family(PROVIDER, r"gpu_\d+x_v100$", "V100", 8, "nvlink", 25),
    Family(PROVIDER, r"gpu_\d+x_rtx6000$", "QUADRO-RTX6000", 1, "pcie", 25),
)

# No ``shapes``: the live listing (GET /instance-types ``specs``) is the authority on vCPUs and
# RAM, and a shape table transcribed by hand could only refuse a correct refresh.
# fmt: on


def gpus_of(instance_type: str) -> tuple[str, int] | None:
    """``gpu_8x_h100_sxm5`` -> ``("H100", 8)``; None for a type whose GPU gpuorch does not know."""
    m = _TYPE.fullmatch(instance_type)
    if m is None or m.group(2) not in GPU_MODELS:
        return None
    count = int(m.group(1))
    return (GPU_MODELS[m.group(2)], count) if count >= 1 else None


CATALOG = AdapterCatalog(
    provider=PROVIDER, billing=BILLING, families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv",
    # Persistent filesystems: $0.20 per GB-month of data stored (https://lambda.ai/pricing, "Storage").
    storage_usd_per_gib_month=0.20,
)
