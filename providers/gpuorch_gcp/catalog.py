"""GCP's catalog: shipped rows (``data/offers.csv``), GPU machine families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without the SDK or
pydantic). Billing: Compute Engine (VMs, GPUs, spot VMs) bills per second with a 1 minute
minimum. Families: the GPU machine-type pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family, Shape

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("gcp", r"g2-standard-", "L4", 8, "pcie", 100),
    Family("gcp", r"a2-(highgpu|megagpu)-", "A100", 16, "nvlink", 100),
    Family("gcp", r"a2-ultragpu-", "A100-80GB", 8, "nvlink", 100),
    Family("gcp", r"a3-highgpu-", "H100", 8, "nvlink", 1000),
    Family("gcp", r"a3-megagpu-", "H100", 8, "nvlink", 1800),
    Family("gcp", r"a3-ultragpu-", "H200", 8, "nvlink", 3200),
    Family("gcp", r"a4-highgpu-", "B200", 8, "nvlink", 3200),
)

# GPUs, vCPUs and RAM (GB as GCP lists it) per machine type, for the row audit: Compute Engine's
# accelerator-optimized and G2 machine-type tables (cloud.google.com/compute/docs/accelerator-optimized-machines).
_GCE = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
SHAPES: tuple[Shape, ...] = (
    Shape("g2-standard-4", 1, 4, 16, _GCE),
    Shape("g2-standard-8", 1, 8, 32, _GCE),
    Shape("a2-highgpu-1g", 1, 12, 85, _GCE),
    Shape("a2-ultragpu-1g", 1, 12, 170, _GCE),
    Shape("a3-highgpu-1g", 1, 26, 234, _GCE),
    Shape("a3-highgpu-8g", 8, 208, 1872, _GCE),
    Shape("a3-megagpu-8g", 8, 208, 1872, _GCE),
    Shape("a3-ultragpu-8g", 8, 224, 2952, _GCE),
    Shape("a4-highgpu-8g", 8, 224, 3968, _GCE),
)
# fmt: on

CATALOG = AdapterCatalog(
    provider="gcp", billing=BillingRule(1, 60), families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv", builder="gpuorch_gcp.snapshot:build",
    shapes=SHAPES,
)
