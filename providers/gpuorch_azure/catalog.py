"""Azure's catalog: shipped rows (``data/offers.csv``, built from ``data/sources/azure-vms.csv``),
GPU VM-size families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without the SDKs or
pydantic). Billing: per second (the global pricing pages); from 2025-06-01 a VM stopped within
its first 300 s is billed 300 s (Microsoft's notice, quoted on Microsoft Q&A 2259765), so a
300 s minimum. Medium confidence; the older per-minute text is Azure China's (docs.azure.cn).
Families: the Azure VM-size pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family

DATA = Path(__file__).resolve().parent / "data"

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("azure", r"Standard_NC\d+as_T4_v3", "T4", 4, "pcie", 32),
    Family("azure", r"Standard_ND40rs_v2", "V100-32GB", 8, "nvlink", 100),
    Family("azure", r"Standard_NV\d+ads_A10_v5", "A10", 2, "pcie", 40),
    Family("azure", r"Standard_NC\d+ads_A100_v4", "A100-80GB", 4, "pcie", 80),
    Family("azure", r"Standard_ND96asr_v4", "A100", 8, "nvlink", 1600),
    Family("azure", r"Standard_ND96amsr_A100_v4", "A100-80GB", 8, "nvlink", 1600),
    Family("azure", r"Standard_NC\d+adi?s_H100_v5", "H100-PCIE", 2, "pcie", 80),
    Family("azure", r"Standard_ND96isr_H100_v5", "H100", 8, "nvlink", 3200),
    Family("azure", r"Standard_ND96isr_H200_v5", "H200", 8, "nvlink", 3200),
    Family("azure", r"Standard_ND96isr_MI300X_v5", "MI300X", 8, "infinity-fabric", 3200),
)
# fmt: on

CATALOG = AdapterCatalog(
    provider="azure", billing=BillingRule(1, 300), families=FAMILIES, rows=DATA / "offers.csv",
    builder="gpuorch_azure.snapshot:build",
)
