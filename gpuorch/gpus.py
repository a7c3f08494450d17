"""Known GPU models: the names users may write in a job spec, and what each card can do.

Sizing and placement read this table. Sources for every number are in docs/sizing.md
("GPU spec table"): vendor datasheets for memory, bandwidth and dense tensor throughput
(no 2:4 sparsity), cloud instance pages for usable memory and the link inside a node.

- ``memory_gib`` is the marketed size; ``usable_gib`` is what the cloud API / nvidia-smi
  report (AWS lists the A10G at 22,888 MiB), which is what a job can actually allocate.
- TFLOPS are dense tensor-core peaks; 0 means the format has no tensor-core support
  (T4 and V100 have no BF16; only Hopper, Ada, Blackwell and MI300X have FP8).
- ``efficiency`` is the default model-FLOPs utilisation the runtime estimator assumes for
  the GPU's class (HBM datacenter vs GDDR); callers may override it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAST_LINKS = frozenset({"nvlink", "infinity-fabric"})


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_gib: float
    aliases: tuple[str, ...] = field(default=())
    arch: str = ""
    memory_type: str = ""
    bandwidth_gbs: float = 0.0  # memory bandwidth, GB/s
    bf16_tflops: float = 0.0
    fp16_tflops: float = 0.0
    fp8_tflops: float = 0.0
    int8_tops: float = 0.0
    four_bit: str | None = None  # "int4" tensor cores, "fp4" (Blackwell), or None
    link: str = "pcie"  # GPU-to-GPU inside a node: "nvlink", "infinity-fabric", "pcie"
    link_gbs: float = 64.0  # bidirectional GB/s per GPU over that link
    usable_gib: float = 0.0
    max_per_node: int = 8
    efficiency: float = 0.30  # default MFU for this GPU's class

    @property
    def usable(self) -> float:
        return self.usable_gib or self.memory_gib

    @property
    def fast_link(self) -> bool:
        return self.link in FAST_LINKS

    def tflops(self, precision: str) -> float:
        """Dense peak for a compute precision; 0 when the card has no tensor support for it.

        Weight-only quantised formats (int8/int4) compute in 16-bit after dequantisation.
        """
        if precision == "fp8":
            return self.fp8_tflops
        if precision == "bf16":
            return self.bf16_tflops
        return self.fp16_tflops or self.bf16_tflops

    def supports(self, precision: str) -> bool:
        return precision in ("int8", "int4", "fp16") or self.tflops(precision) > 0


_HBM, _GDDR = 0.40, 0.30  # default MFU by class (docs/sizing.md, "Runtime")

# One GPU per row, columns aligned: rows run past 120 characters (noqa: E501) so the table reads across.
# fmt: off
GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("T4", 16, (), "turing", "GDDR6", 320, 0, 65, 0, 130, "int4", "pcie", 32, 15.0, 8, _GDDR),
    GpuSpec("V100", 16, ("V100-16GB",), "volta", "HBM2", 900, 0, 125, 0, 0, None, "nvlink", 300, 15.8, 8, 0.35),
    GpuSpec("V100-32GB", 32, (), "volta", "HBM2", 900, 0, 125, 0, 0, None, "nvlink", 300, 31.7, 8, 0.35),
    GpuSpec("A10G", 24, (), "ampere", "GDDR6", 600, 70, 70, 0, 140, "int4", "pcie", 64, 22.35, 8, _GDDR),
    GpuSpec("A10", 24, (), "ampere", "GDDR6", 600, 125, 125, 0, 250, "int4", "pcie", 64, 22.5, 4, _GDDR),
    GpuSpec("L4", 24, (), "ada", "GDDR6", 300, 121, 121, 242, 242, "int4", "pcie", 64, 22.35, 8, _GDDR),
    GpuSpec("L40", 48, (), "ada", "GDDR6", 864, 181, 181, 362, 362, "int4", "pcie", 64, 44.7, 8, _GDDR),
    GpuSpec("L40S", 48, (), "ada", "GDDR6", 864, 362, 362, 733, 733, "int4", "pcie", 64, 44.7, 8, _GDDR),
    GpuSpec("A100", 40, ("A100-40GB",), "ampere", "HBM2", 1555, 312, 312, 0, 624, "int4", "nvlink", 600, 40.0, 16, _HBM),  # noqa: E501
    GpuSpec("A100-80GB", 80, ("A100-80GB-SXM",), "ampere", "HBM2e", 2039, 312, 312, 0, 624, "int4", "nvlink", 600, 80.0, 8, _HBM),  # noqa: E501
    GpuSpec("H100", 80, ("H100-SXM", "H100-80GB", "H100-MEGA"), "hopper", "HBM3", 3350, 989, 989, 1979, 1979, None, "nvlink", 900, 79.6, 8, _HBM),  # noqa: E501
    GpuSpec("H100-PCIE", 80, ("H100-PCIe",), "hopper", "HBM2e", 2000, 756, 756, 1513, 1513, None, "pcie", 128, 79.6, 8, _HBM),  # noqa: E501
    GpuSpec("H200", 141, ("H200-SXM",), "hopper", "HBM3e", 4800, 989, 989, 1979, 1979, None, "nvlink", 900, 140.4, 8, _HBM),  # noqa: E501
    GpuSpec("B200", 180, (), "blackwell", "HBM3e", 8000, 2250, 2250, 4500, 4500, "fp4", "nvlink", 1800, 179.0, 8, _HBM),
    GpuSpec("RTXA6000", 48, ("RTX-A6000", "A6000"), "ampere", "GDDR6", 768, 155, 155, 0, 310, "int4", "pcie", 64, 47.5, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX6000ADA", 48, ("RTX-6000-ADA", "RTX6000-Ada"), "ada", "GDDR6", 960, 364, 364, 728, 728, "int4", "pcie", 64, 47.5, 8, _GDDR),  # noqa: E501
    GpuSpec("MI300X", 192, (), "cdna3", "HBM3", 5300, 1307, 1307, 2615, 2615, None, "infinity-fabric", 896, 191.5, 8, 0.30),  # noqa: E501
)
# fmt: on

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
