"""Azure's catalog: GPU VM-size families, shapes and billing rule. No shipped price rows: no
first-party per-size price copy could be cited (``data/sources/README.md``, docs/catalog.md), so
Azure's prices come only from the Retail Prices API, through ``gpuorch catalog refresh`` and the
daemon's scheduled refresh (``$GPUORCH_HOME/catalog/azure.csv``), or from a user's ``catalog:``.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without the SDKs or
pydantic). Billing: per second (the global pricing pages); from 2025-06-01 a VM stopped within
its first 300 s is billed 300 s (Microsoft's notice, quoted on Microsoft Q&A 2259765), so a
300 s minimum. Medium confidence; the older per-minute text is Azure China's (docs.azure.cn).
Families: the Azure VM-size pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family, Shape

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("azure", r"Standard_NC\d+as_T4_v3", "T4", 4, "pcie", 32),
    Family("azure", r"Standard_ND40rs_v2", "V100-32GB", 8, "nvlink", 100, "infiniband"),
    Family("azure", r"Standard_NV\d+ads_A10_v5", "A10", 2, "pcie", 40),
    Family("azure", r"Standard_NC\d+ads_A100_v4", "A100-PCIE-80GB", 4, "pcie", 80),
    Family("azure", r"Standard_ND96asr_v4", "A100", 8, "nvlink", 1600, "infiniband"),
    Family("azure", r"Standard_ND96amsr_A100_v4", "A100-80GB", 8, "nvlink", 1600, "infiniband"),
    Family("azure", r"Standard_NC\d+adi?s_H100_v5", "H100-NVL", 2, "pcie", 80),
    Family("azure", r"Standard_ND96isr_H100_v5", "H100", 8, "nvlink", 3200, "infiniband"),
    Family("azure", r"Standard_ND96isr_H200_v5", "H200", 8, "nvlink", 3200, "infiniband"),
    Family("azure", r"Standard_ND96isr_MI300X_v5", "MI300X", 8, "infinity-fabric", 3200, "infiniband"),
)

# GPUs, vCPUs and RAM (GiB) per VM size, for the row audit: the Azure GPU VM-size pages
# (learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/<series>).
_SIZES = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
SHAPES: tuple[Shape, ...] = (
    Shape("Standard_NC4as_T4_v3", 1, 4, 28, _SIZES + "ncast4v3-series"),
    Shape("Standard_NC8as_T4_v3", 1, 8, 56, _SIZES + "ncast4v3-series"),
    Shape("Standard_NC16as_T4_v3", 1, 16, 110, _SIZES + "ncast4v3-series"),
    Shape("Standard_NC64as_T4_v3", 4, 64, 440, _SIZES + "ncast4v3-series"),
    Shape("Standard_NV36ads_A10_v5", 1, 36, 440, _SIZES + "nvadsa10v5-series"),
    Shape("Standard_NV72ads_A10_v5", 2, 72, 880, _SIZES + "nvadsa10v5-series"),
    Shape("Standard_NC24ads_A100_v4", 1, 24, 220, _SIZES + "nca100v4-series"),
    Shape("Standard_NC48ads_A100_v4", 2, 48, 440, _SIZES + "nca100v4-series"),
    Shape("Standard_NC96ads_A100_v4", 4, 96, 880, _SIZES + "nca100v4-series"),
    Shape("Standard_ND96asr_v4", 8, 96, 900, _SIZES + "nda100v4-series"),
    Shape("Standard_ND96amsr_A100_v4", 8, 96, 1900, _SIZES + "ndma100v4-series"),
    Shape("Standard_NC40ads_H100_v5", 1, 40, 320, _SIZES + "ncadsh100v5-series"),
    Shape("Standard_NC80adis_H100_v5", 2, 80, 640, _SIZES + "ncadsh100v5-series"),
    Shape("Standard_ND96isr_H100_v5", 8, 96, 1900, _SIZES + "ndh100v5-series"),
    Shape("Standard_ND96isr_H200_v5", 8, 96, 1850, _SIZES + "ndh200v5-series"),
    Shape("Standard_ND96isr_MI300X_v5", 8, 96, 1850, _SIZES + "ndmi300xv5-series"),
)
# fmt: on

CATALOG = AdapterCatalog(provider="azure", billing=BillingRule(1, 300), families=FAMILIES, shapes=SHAPES)
