"""Build Azure's shipped rows (``data/offers.csv``) from the committed price slice, offline.

    python -m gpuorch.catalog.snapshot DATA_DIR

The slice, ``data/sources/azure-vms.csv``, is committed with the adapter: rows copied unchanged
from a public price catalog (provenance in ``data/sources/README.md``); its known errors are
corrected here rather than in the copied rows. docs/catalog.md has the choices and gaps. The
daemon never runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuorch.provider import gpus
from gpuorch.provider.catalog import OfferRow, price_or_none

from .catalog import CATALOG, DATA

AZURE_SLICE = DATA / "sources" / "azure-vms.csv"
# The source lists Standard_ND96isr_H100_v5 with 12 GPUs; Azure's ND H100 v5 page says 8 H100 per VM.
AZURE_GPU_COUNT = {"Standard_ND96isr_H100_v5": 8}
# The source lists Standard_ND96amsr_A100_v4 with 1800 GiB; Azure's NDm A100 v4 page says 1900 GiB
# (the row audit, ``gpuorch.catalog.audit``, checks every row against ``catalog.SHAPES``).
AZURE_MEMORY_GIB = {"Standard_ND96amsr_A100_v4": 1900.0}


def azure_rows(path: Path) -> list[OfferRow]:
    """One row per (VM size, region); Azure prices a VM size per region, so the zone is the region.

    The GPU is the instance family's (``catalog.FAMILIES``): the source calls the H100 NVL (94 GB)
    of the NC H100 v5 sizes "H100" and the A100 80GB PCIe of NC A100 v4 "A100-80GB"; gpuorch
    files them as H100-NVL and A100-PCIE-80GB. GPU memory is the GPU table's usable
    memory (the source has none). A spot price equal to the on-demand price (the source's H100 v5
    rows) is read as "no spot price published" and left out."""
    rule = CATALOG.billing
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            family = CATALOG.family_of(r["InstanceType"])
            assert family is not None, r["InstanceType"]
            spec, named = gpus.lookup(family.gpu), gpus.lookup(r["AcceleratorName"])
            assert spec is not None and named is not None and gpus.family(spec.name) == gpus.family(named.name)
            count = AZURE_GPU_COUNT.get(r["InstanceType"], int(float(r["AcceleratorCount"])))
            assert 1 <= count <= family.max_gpus, r
            price, spot = float(r["Price"]), price_or_none(r["SpotPrice"])
            memory = AZURE_MEMORY_GIB.get(r["InstanceType"], float(r["MemoryGiB"]))
            out.append(OfferRow(
                "azure", r["Region"], r["Region"], r["InstanceType"], spec.name, count, spec.usable,
                float(r["vCPUs"]), memory, price, spot if spot is not None and spot < price else None,
                rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(r["InstanceType"], count), None,
            ))  # fmt: skip
    return out


def build(data_dir: Path) -> list[OfferRow]:
    """``data_dir`` is unused: the Azure slice is committed with the adapter."""
    return azure_rows(AZURE_SLICE)
