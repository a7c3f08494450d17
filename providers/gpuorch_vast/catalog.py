"""Vast.ai's catalog: shipped rows (``data/offers.csv``), GPU families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without the vastai
client or pydantic).

Billing: Vast bills per second, GPU time from the moment an instance runs, storage from its
creation until it is destroyed, a stopped instance included (https://vast.ai/pricing, "Per-second
billing"; https://docs.vast.ai/sdk/python/reference/show-instances: "stopped: Container is halted.
Disk charges continue; no GPU charges"; https://docs.vast.ai/guides/serverless/pricing: per second
"at the same price as Vast.ai's non-Serverless GPU instances"). No minimum charge is documented.
That is why the adapter destroys, never stops, an instance it is done with (an outbid one too).

An offer is a class, not a host: GPU model x count in one country (``RTX4090x1`` in ``US``). The
marketplace's hosts change by the minute; the launch picks a live ask of the class then.
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family, Shape

# Every rented card is a PCIe card to gpuorch: Vast sells no NVLink-bridged consumer pairs, and
# its SXM hosts' NVLink is not a listing guarantee (``bw_nvlink`` varies by host), so the
# conservative link is PCIe. One node only (no gang placement on a marketplace).
_PCIE = ("RTX3090", "RTX4090", "RTX5090", "RTXA4000", "RTXA5000", "RTXA6000", "RTX6000ADA", "A10", "A40", "L4",
         "L40", "L40S", "T4", "V100", "V100-32GB", "A100", "A100-PCIE-80GB", "H100-PCIE", "H100-NVL", "RTX3080",
         "RTX3090TI", "RTX4070", "RTX4080", "RTX5070", "RTX5080", "RTX5000ADA", "RTXPRO6000", "QUADRO-RTX6000", "A800",
         "A800-80GB", "H200-NVL")
_NVLINK = ("A100-80GB", "H100", "H200", "B200")
FAMILIES: tuple[Family, ...] = (
    *(Family("vast", rf"{g}x\d+$", g, 8, "pcie", 1) for g in _PCIE),
    *(Family("vast", rf"{g}x\d+$", g, 8, "nvlink", 1) for g in _NVLINK),
    Family("vast", r"MI300Xx\d+$", "MI300X", 8, "infinity-fabric", 1),
)

# A class has no fixed shape: its hosts differ. What every host rented meets is the search's floor
# per GPU (``config.VastOptions.min_cpu_per_gpu`` / ``min_ram_gib_per_gpu`` default to these), so
# that is the shape the row audit checks a class against.
CPU_PER_GPU, RAM_GIB_PER_GPU = 4, 16
_FLOOR = "the adapter's search floor per GPU (providers/gpuorch_vast/catalog.py), not one host's shape"
SHAPES: tuple[Shape, ...] = tuple(
    Shape(f"{f.gpu}x{n}", n, CPU_PER_GPU * n, RAM_GIB_PER_GPU * n, _FLOOR) for f in FAMILIES for n in (1, 2, 4, 8))

CATALOG = AdapterCatalog(
    provider="vast", billing=BillingRule(1, 0), families=FAMILIES, shapes=SHAPES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv", builder="gpuorch_vast.snapshot:build",
    # Indicative: each host prices its own disk (a volume offer's storage_cost, $/GB-month); gpuorch
    # bills a job's volume at this rate, a typical host's, until the daemon reads the offer's.
    storage_usd_per_gib_month=0.15,
)
