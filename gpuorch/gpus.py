"""Known GPU models: the names users may write in a job spec and their memory.

The full spec table (bandwidth, TFLOPS, precisions, interconnect) lives here too; sizing and
placement read it. Memory is the marketed size in GiB; clouds report a little less usable
memory (AWS lists the A10G at 22,888 MiB), which `memory_matches` tolerates.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_gib: float
    aliases: tuple[str, ...] = field(default=())


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("T4", 16),
    GpuSpec("V100", 16, ("V100-16GB",)),
    GpuSpec("V100-32GB", 32),
    GpuSpec("A10G", 24),
    GpuSpec("A10", 24),
    GpuSpec("L4", 24),
    GpuSpec("L40S", 48),
    GpuSpec("A100", 40, ("A100-40GB",)),
    GpuSpec("A100-80GB", 80, ("A100-80GB-SXM",)),
    GpuSpec("H100", 80, ("H100-SXM", "H100-80GB")),
    GpuSpec("H100-PCIE", 80, ("H100-PCIe",)),
    GpuSpec("H200", 141),
    GpuSpec("B200", 180),
    GpuSpec("RTXA6000", 48, ("RTX-A6000", "A6000")),
    GpuSpec("RTX6000ADA", 48, ("RTX-6000-ADA", "L40")),
    GpuSpec("MI300X", 192),
)

_BY_NAME: dict[str, GpuSpec] = {}
for _g in GPUS:
    for _n in (_g.name, *_g.aliases):
        _BY_NAME[_n.upper()] = _g

# Usable memory may be ~7% below the marketed size (A10G: 22.35 GiB for "24 GB").
MEMORY_TOLERANCE = 0.92


def lookup(name: str) -> GpuSpec | None:
    return _BY_NAME.get(name.strip().upper())


def family(name: str) -> str:
    """Model family without the memory variant: ``A100-80GB`` -> ``A100``."""
    spec = lookup(name)
    base = spec.name if spec else name.upper()
    return base.split("-")[0]


def known_names() -> list[str]:
    return [g.name for g in GPUS]


def memory_matches(offered_gib: float, required_gib: float) -> bool:
    return offered_gib >= required_gib * MEMORY_TOLERANCE
