"""The local provider's offers: a simulated multi-region GPU market, plus this host's real GPUs.

The simulated market is what ``make demo`` places jobs on. Its prices follow AWS's on-demand
list prices per GPU (g4dn T4, g5 A10G, g6 L4, p4d A100, p4de A100-80GB, p5 H100, after the
2025 price cuts); spot runs at 30-40% of on-demand, a little different in every zone. The numbers
are deterministic (no randomness, no clock) so tests and demos place jobs the same way each run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuorch.provider import Offer, gpus

PROVIDER = "local"
HOST_ZONE = "local-host"

# region -> (zones, on-demand price multiplier: the west coast costs a little more)
REGIONS: dict[str, tuple[tuple[str, ...], float]] = {
    "local-east": (("local-east-a", "local-east-b"), 1.0),
    "local-west": (("local-west-a",), 1.04),
}


@dataclass(frozen=True)
class _Gpu:
    name: str  # canonical, from gpuorch.gpus
    usd_per_gpu_hour: float  # on-demand, before the region multiplier
    vcpus_per_gpu: int
    memory_gib_per_gpu: int
    counts: tuple[int, ...]  # GPUs per instance type offered
    zones: tuple[str, ...]  # the big cards are scarce: not every zone has them
    interconnect: str | None  # between the GPUs of a multi-GPU type
    interruption_bucket: str  # AWS spot-advisor style


_ALL = ("local-east-a", "local-east-b", "local-west-a")
_GPUS: tuple[_Gpu, ...] = (
    _Gpu("T4", 0.526, 4, 16, (1, 4), _ALL, "pcie", "<5%"),
    _Gpu("A10G", 1.006, 4, 16, (1, 4), _ALL, "pcie", "5-10%"),
    _Gpu("L4", 0.805, 4, 16, (1, 4), _ALL, "pcie", "<5%"),
    _Gpu("A100", 2.745, 12, 144, (1, 8), ("local-east-a", "local-east-b"), "nvlink", "10-15%"),
    _Gpu("A100-80GB", 3.431, 12, 144, (1, 2, 4, 8), ("local-east-a", "local-west-a"), "nvlink", "15-20%"),
    _Gpu("H100", 6.880, 24, 256, (1, 8), ("local-east-a", "local-west-a"), "nvlink", ">20%"),
)


# Roughly what the market's cards cost per GiB of GPU memory (an H100: 6.88 / 80); prices the
# host's card when the market does not sell that model (an H200 comes to ~8.5 USD an hour).
_USD_PER_GPU_GIB_HOUR = 0.06


def instance_type(gpu: str, count: int) -> str:
    """``local.a100-80gb.1``: the GPU model and how many of it."""
    return f"local.{gpu.lower()}.{count}"


def _spot_fraction(zone: str, gpu: str) -> float:
    """30-40% of on-demand, stable per (zone, GPU); crc32 because ``hash`` is salted per process."""
    return 0.30 + (zlib.crc32(f"{zone}/{gpu}".encode()) % 101) / 1000


def default_offers() -> list[Offer]:
    """The simulated market: every GPU type and size in the zones that carry it."""
    out: list[Offer] = []
    for region, (zones, multiplier) in REGIONS.items():
        for zone in zones:
            for g in _GPUS:
                if zone not in g.zones:
                    continue
                memory = gpus.lookup(g.name).memory_gib  # type: ignore[union-attr]
                for n in g.counts:
                    on_demand = round(g.usd_per_gpu_hour * n * multiplier, 4)
                    out.append(Offer(
                        provider=PROVIDER, region=region, zone=zone, instance_type=instance_type(g.name, n),
                        gpu=g.name, gpu_count=n, gpu_memory_gib=memory, vcpus=g.vcpus_per_gpu * n,
                        memory_gib=g.memory_gib_per_gpu * n, price_per_hour=on_demand,
                        spot_price_per_hour=round(on_demand * _spot_fraction(zone, g.name), 4),
                        billing_granularity_s=1, min_billing_s=60,
                        interconnect=g.interconnect if n > 1 else None, interruption_bucket=g.interruption_bucket,
                    ))
    return out


def catalog_offers(options: dict[str, Any], home: Path) -> list[Offer]:
    """The simulated market, without probing the host's GPUs (`submit`'s quick fit check):
    ``LocalProvider.catalog_offers``, and the catalog's ``offers`` (``gpuorch offers`` reads it
    without importing the provider module)."""
    return default_offers()


def canonical_gpu(reported: str, memory_gib: float) -> str | None:
    """Map an ``nvidia-smi`` name (``NVIDIA A100-SXM4-80GB``, ``Tesla T4``) to gpuorch.gpus.

    Tries the full name (``H100-PCIe``), then the model with its memory variant (``A100`` + 80 GB
    -> ``A100-80GB``), then the bare model. None when gpuorch does not know the card.
    """
    words = reported.replace("NVIDIA", " ").replace("Tesla", " ").split()
    if not words:
        return None
    base = words[0].split("-")[0]
    for name in ("-".join(words), f"{base}-{round(memory_gib)}GB", base):
        spec = gpus.lookup(name)
        if spec is not None:
            return spec.name
    return None


def host_offers(timeout_s: float = 5.0) -> list[Offer]:
    """One on-demand offer for this host's own GPUs, if ``nvidia-smi`` finds any.

    Priced at the simulated market's on-demand rate for that model (cards the market does not
    sell: a rate per GiB of GPU memory) so that cost accounting in demos stays meaningful.
    Cards gpuorch does not know are left out.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []  # no driver loaded, or a hung GPU: the simulated market still works
    found: dict[str, tuple[int, float]] = {}
    for line in out.splitlines():
        name, _, mib = line.rpartition(",")
        try:
            memory_gib = float(mib) / 1024
        except ValueError:
            continue
        gpu = canonical_gpu(name.strip(), memory_gib)
        if gpu is not None:
            count, _ = found.get(gpu, (0, 0.0))
            found[gpu] = (count + 1, memory_gib)
    if not found:
        return []
    # One instance type: the model this host has most of (a mixed host is rare).
    gpu, (count, memory_gib) = max(found.items(), key=lambda kv: kv[1][0])
    rate = next((g.usd_per_gpu_hour for g in _GPUS if g.name == gpu), memory_gib * _USD_PER_GPU_GIB_HOUR)
    return [Offer(
        provider=PROVIDER, region=HOST_ZONE, zone=HOST_ZONE, instance_type=f"local.host.{gpu.lower()}.{count}",
        gpu=gpu, gpu_count=count, gpu_memory_gib=round(memory_gib, 1), vcpus=os.cpu_count() or 1,
        memory_gib=_host_memory_gib(), price_per_hour=round(rate * count, 4), spot_price_per_hour=None,
        billing_granularity_s=1, min_billing_s=60,
    )]


def _host_memory_gib() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0
