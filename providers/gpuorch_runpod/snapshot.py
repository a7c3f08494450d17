"""Writes RunPod's shipped rows (``data/offers.csv``) from the published prices below, offline:

    python -m gpuorch_runpod.snapshot

Every row carries its provenance (``source``, ``as_of``: the page and the date its prices are
from); ``gpuorch catalog refresh --provider runpod`` replaces them with the API's prices of today.
Prices are per GPU-hour: a pod of n GPUs costs n times (RunPod prices GPUs, not machines).
Stdlib only; the daemon never runs this.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from gpuorch.provider.catalog import OfferRow

from .catalog import CATALOG, COUNTS, PROVIDER, instance_type

_DEPLOYBASE = "https://deploybase.ai/articles/runpod-gpu-pricing"
_DEPLOYBASE_DATE = "2026-03-10"
_PRICING = "https://www.runpod.io/pricing"
# gpu: (on-demand $/GPU-h, spot $/GPU-h, vCPUs per GPU, RAM GiB per GPU, source, date). vCPU and
# RAM only where the pricing page states them (0: not published; the live refresh fills them).
PRICES: dict[str, tuple[float, float, float, float, str, str]] = {
    "RTX3090": (0.39, 0.22, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "RTX4090": (0.60, 0.34, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "RTX5090": (1.22, 0.69, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "L4": (0.78, 0.44, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "L40": (1.22, 0.69, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "L40S": (1.40, 0.79, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "A100-PCIE-80GB": (2.10, 1.19, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "A100-80GB": (2.45, 1.39, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "H100-PCIE": (3.51, 1.99, 0, 0, _DEPLOYBASE, _DEPLOYBASE_DATE),
    "H100": (4.76, 2.69, 20, 125, f"{_DEPLOYBASE} (vCPU, RAM: {_PRICING})", _DEPLOYBASE_DATE),
    "H200": (6.35, 3.59, 24, 276, f"{_DEPLOYBASE} (vCPU, RAM: {_PRICING})", _DEPLOYBASE_DATE),
    "B200": (10.57, 5.98, 28, 283, f"{_DEPLOYBASE} (vCPU, RAM: {_PRICING})", _DEPLOYBASE_DATE),
}
PROVENANCE = ("source", "as_of")


def rows() -> list[tuple[OfferRow, str, str]]:
    """(row, source, as_of) for every GPU and count, in the ``secure`` cloud (the pricing page's)."""
    from gpuorch.provider import gpus

    rule = CATALOG.billing
    out = []
    for gpu, (price, spot, vcpus, ram, source, as_of) in PRICES.items():
        spec = gpus.lookup(gpu)
        assert spec is not None, gpu
        for n in COUNTS:
            out.append((OfferRow(
                PROVIDER, "secure", "secure", instance_type(gpu, n), spec.name, n, spec.usable, vcpus * n, ram * n,
                round(price * n, 4), round(spot * n, 4), rule.increment_s, rule.minimum_s,
                CATALOG.interconnect_for(instance_type(gpu, n), n), None,
            ), source, as_of))  # fmt: skip
    return out


def write(path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([*OfferRow._fields, *PROVENANCE])
        for row, source, as_of in rows():
            w.writerow([*("" if v is None else (f"{v:.10g}" if isinstance(v, float) else v) for v in row),
                        source, as_of])


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else CATALOG.rows or Path("offers.csv"))
