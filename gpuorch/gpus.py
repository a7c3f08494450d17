"""Known GPU models: the names users may write in a job spec, and what each card can do.

Sizing and placement read this table. Sources for every number are in docs/sizing.md
("GPU spec table"; the rows added for issues 13 and 19 -- H100-NVL, A100-PCIE-80GB, GH200,
A40, B300, MI325X -- in docs/catalog.md, "GPU variants and families"): vendor datasheets for
memory, bandwidth and dense tensor throughput (no 2:4 sparsity), cloud instance pages for usable
memory and the link inside a node.

- ``memory_gib`` is the marketed size; ``usable_gib`` is what the cloud API / nvidia-smi
  report (AWS lists the A10G at 22,888 MiB), which is what a job can actually allocate.
- TFLOPS are dense tensor-core peaks; 0 means the format has no tensor-core support
  (T4 and V100 have no BF16; only Hopper, Ada, Blackwell and MI300X have FP8).
- ``efficiency`` is the default model-FLOPs utilisation the runtime estimator assumes for
  the GPU's class (HBM datacenter vs GDDR); callers may override it.
- ``family`` names the model a job's bare name selects: ``A100`` matches A100, A100-80GB and
  A100-PCIE-80GB; ``variant_for(name, memory)`` resolves a price list's name plus memory.
"""

from __future__ import annotations

import re
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
    family: str = ""  # the model a name without memory selects (A100 -> A100, A100-80GB, ...); "" = own name

    @property
    def model(self) -> str:
        """The family this variant belongs to: ``A100-80GB`` -> ``A100``, ``H100-NVL`` -> ``H100``."""
        return self.family or self.name

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
    GpuSpec("V100-32GB", 32, (), "volta", "HBM2", 900, 0, 125, 0, 0, None, "nvlink", 300, 31.7, 8, 0.35, "V100"),
    GpuSpec("A10G", 24, (), "ampere", "GDDR6", 600, 70, 70, 0, 140, "int4", "pcie", 64, 22.35, 8, _GDDR),
    GpuSpec("A10", 24, (), "ampere", "GDDR6", 600, 125, 125, 0, 250, "int4", "pcie", 64, 22.5, 4, _GDDR),
    GpuSpec("L4", 24, (), "ada", "GDDR6", 300, 121, 121, 242, 242, "int4", "pcie", 64, 22.35, 8, _GDDR),
    GpuSpec("L40", 48, (), "ada", "GDDR6", 864, 181, 181, 362, 362, "int4", "pcie", 64, 44.7, 8, _GDDR),
    GpuSpec("L40S", 48, (), "ada", "GDDR6", 864, 362, 362, 733, 733, "int4", "pcie", 64, 44.7, 8, _GDDR),
    GpuSpec("A40", 48, (), "ampere", "GDDR6", 696, 150, 150, 0, 299, "int4", "nvlink", 112.5, 44.99, 8, _GDDR),
    GpuSpec("A100", 40, ("A100-40GB", "A100-SXM4-40GB"), "ampere", "HBM2", 1555, 312, 312, 0, 624, "int4", "nvlink", 600, 40.0, 16, _HBM, "A100"),  # noqa: E501
    GpuSpec("A100-80GB", 80, ("A100-80GB-SXM", "A100-SXM4-80GB"), "ampere", "HBM2e", 2039, 312, 312, 0, 624, "int4", "nvlink", 600, 80.0, 8, _HBM, "A100"),  # noqa: E501
    GpuSpec("A100-PCIE-80GB", 80, ("A100-80GB-PCIE", "A100-PCIe-80GB"), "ampere", "HBM2e", 1935, 312, 312, 0, 624, "int4", "pcie", 64, 80.0, 8, _HBM, "A100"),  # noqa: E501
    GpuSpec("H100", 80, ("H100-SXM", "H100-80GB", "H100-MEGA", "H100-SXM5-80GB"), "hopper", "HBM3", 3350, 989, 989, 1979, 1979, None, "nvlink", 900, 79.6, 8, _HBM, "H100"),  # noqa: E501
    GpuSpec("H100-PCIE", 80, ("H100-PCIe",), "hopper", "HBM2e", 2000, 756, 756, 1513, 1513, None, "pcie", 128, 79.6, 8, _HBM, "H100"),  # noqa: E501
    GpuSpec("H100-NVL", 94, ("H100-NVL-94GB", "H100NVL"), "hopper", "HBM3", 3900, 835, 835, 1671, 1671, None, "pcie", 128, 93.6, 8, _HBM, "H100"),  # noqa: E501
    GpuSpec("GH200", 96, ("GH200-96GB",), "hopper", "HBM3", 4000, 989, 989, 1979, 1979, None, "nvlink", 900, 95.0, 1, _HBM),  # noqa: E501
    GpuSpec("H200", 141, ("H200-SXM",), "hopper", "HBM3e", 4800, 989, 989, 1979, 1979, None, "nvlink", 900, 140.4, 8, _HBM),  # noqa: E501
    GpuSpec("B200", 180, (), "blackwell", "HBM3e", 8000, 2250, 2250, 4500, 4500, "fp4", "nvlink", 1800, 179.0, 8, _HBM),
    GpuSpec("B300", 288, ("B300-SXM",), "blackwell", "HBM3e", 8000, 2250, 2250, 4500, 125, "fp4", "nvlink", 1800, 268.0, 8, _HBM),  # noqa: E501
    GpuSpec("RTXA6000", 48, ("RTX-A6000", "A6000"), "ampere", "GDDR6", 768, 155, 155, 0, 310, "int4", "pcie", 64, 47.5, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX6000ADA", 48, ("RTX-6000-ADA", "RTX6000-Ada"), "ada", "GDDR6", 960, 364, 364, 728, 728, "int4", "pcie", 64, 47.5, 8, _GDDR),  # noqa: E501
    # Consumer and workstation cards the GPU marketplaces rent (issue 33). GeForce tensor cores run
    # 16-bit at half rate with FP32 accumulation (what training uses), so the peaks below are those.
    # No NVLink between rented cards (the 3090 and A5000 have bridge connectors; marketplaces do not
    # sell bridged pairs), PCIe 4.0 x16 = 64 GB/s, PCIe 5.0 = 128. Sources:
    # RTX 4090: NVIDIA Ada Lovelace architecture whitepaper v1.1, Table 1 (24 GB GDDR6X, 1008 GB/s,
    #   BF16/FP16 w/ FP32 acc. 165.2 dense, FP8 330.3, INT8 660.6 TOPS).
    # RTX 3090: NVIDIA Ampere GA102 GPU architecture whitepaper, Table 2 (24 GB GDDR6X, 936 GB/s,
    #   FP16/BF16 w/ FP32 acc. 71 dense, INT8 284 TOPS).
    # RTX 5090: NVIDIA RTX Blackwell GPU architecture whitepaper, Table 1 (32 GB GDDR7, 1792 GB/s,
    #   FP16/BF16 w/ FP32 acc. 209.5 dense, FP8 419, INT8 838 TOPS, FP4), PCIe 5.0.
    # RTX A5000: NVIDIA RTX A5000 datasheet (24 GB GDDR6, 768 GB/s, 222.2 tensor TFLOPS sparse -> 111.1).
    # RTX A4000: NVIDIA RTX A4000 datasheet (16 GB GDDR6, 448 GB/s, 153.4 tensor TFLOPS sparse -> 76.7).
    GpuSpec("RTX4090", 24, ("RTX-4090", "4090", "GeForce-RTX-4090"), "ada", "GDDR6X", 1008, 165.2, 165.2, 330.3, 660.6, "int4", "pcie", 64, 23.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX3090", 24, ("RTX-3090", "3090", "GeForce-RTX-3090"), "ampere", "GDDR6X", 936, 71, 71, 0, 284, "int4", "pcie", 64, 24.0, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX5090", 32, ("RTX-5090", "5090", "GeForce-RTX-5090"), "blackwell", "GDDR7", 1792, 209.5, 209.5, 419, 838, "fp4", "pcie", 128, 31.84, 8, _GDDR),  # noqa: E501
    GpuSpec("RTXA5000", 24, ("RTX-A5000", "A5000"), "ampere", "GDDR6", 768, 111.1, 111.1, 0, 222.2, "int4", "pcie", 64, 23.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTXA4000", 16, ("RTX-A4000", "A4000"), "ampere", "GDDR6", 448, 76.7, 76.7, 0, 153.4, "int4", "pcie", 64, 15.99, 8, _GDDR),  # noqa: E501
    # More cards the markets list (issue 33): RunPod's GPU types (https://docs.runpod.io/references/gpu-types:
    # RTX 3080, 3090 Ti, 4080, 5080, RTX 4000/5000 Ada) and Vast's gpu_name values (RTX 3080, 3090 Ti, 4070,
    # 4080, 5070, 5080, RTX 5000Ada, RTX PRO 6000 S/WS, H200 NVL, A800 PCIE, Q RTX 6000). 16-bit peaks are
    # dense with FP32 accumulation; GeForce cards run it at half the FP16-accumulate rate, workstation and
    # datacenter cards at full rate. Where a datasheet gives only a sparse figure it is halved; where it
    # gives none, SMs x boost clock x the architecture's per-SM rate from its whitepaper (GA102: 512
    # FLOP/clk/SM FP16 w/ FP32 acc. on GeForce; AD102/GB202 the same, FP8 x2, INT8 x4 on GeForce Ada).
    # RTX 3080: GA102 whitepaper Table 2 (10 GB GDDR6X, 760 GB/s, 59.5 TFLOPS, INT8 238 TOPS).
    # RTX 3090 Ti: NVIDIA spec page (24 GB GDDR6X, 21 Gbps x 384 bit = 1008 GB/s, 84 SMs, 1.86 GHz): 80 / 320.
    # RTX 4070: NVIDIA spec page (12 GB GDDR6X, 504 GB/s, 46 SMs, 2.475 GHz): 58.3 / FP8 116.6 / INT8 233.2.
    # RTX 4080: Ada whitepaper v1.1 Table 2 (16 GB GDDR6X, 716.8 GB/s, 97.5 / FP8 194.9 / INT8 389.9).
    # RTX 5070: NVIDIA spec page (12 GB GDDR7, 672 GB/s, 48 SMs, 2.51 GHz): 61.7 / FP8 123.4 / INT8 246.7; PCIe 5.0.
    # RTX 5080: RTX Blackwell whitepaper Table 1 (16 GB GDDR7, 960 GB/s, 84 SMs, 2.617 GHz): 112.6 / 225.1 / 450.2.
    # RTX 4000 Ada: datasheet (20 GB GDDR6, 360 GB/s, 327.6 TFLOPS FP8 sparse -> FP8/INT8 163.8, 16-bit 81.9).
    # RTX 5000 Ada: datasheet (32 GB GDDR6, 576 GB/s, 1044.4 TFLOPS FP8 sparse -> 522.2, 16-bit 261.1).
    # RTX PRO 6000 Blackwell (Server and Workstation Editions): datasheet (96 GB GDDR7, 1792 GB/s, 4,000 AI
    #   TOPS FP4 sparse -> FP8/INT8 1000, 16-bit 500 dense), PCIe 5.0, no NVLink.
    # H200 NVL: H200 datasheet, NVL column (141 GB HBM3e, 4.8 TB/s, FP16/BF16 1,671 and FP8/INT8 3,341
    #   sparse -> 835.5 / 1670.5); NVLink bridges join 2 or 4 cards only, so the node link is PCIe 5.0.
    # A800: the A100's export variant (same GA100 SM rates; NVLink cut to 400 GB/s, bridged pairs only):
    #   A800 40GB Active datasheet (40 GB HBM2, 1555 GB/s, 623.8 TFLOPS 16-bit sparse -> 311.9, INT8 623.8)
    #   and the A800 80GB PCIe (80 GB HBM2e, 1935 GB/s, same rates).
    # Quadro RTX 6000: datasheet (24 GB GDDR6, 672 GB/s, 130.5 TFLOPS FP16 tensor, INT8 261 TOPS, no BF16,
    #   Turing), PCIe 3.0 x16 = 32 GB/s (NVLink bridges pair cards; markets do not sell bridged pairs).
    GpuSpec("RTX3080", 10, ("RTX-3080", "3080", "GeForce-RTX-3080"), "ampere", "GDDR6X", 760, 59.5, 59.5, 0, 238, "int4", "pcie", 64, 10.0, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX3090TI", 24, ("RTX-3090-Ti", "3090Ti", "GeForce-RTX-3090-Ti"), "ampere", "GDDR6X", 1008, 80, 80, 0, 320, "int4", "pcie", 64, 23.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX4070", 12, ("RTX-4070", "4070", "GeForce-RTX-4070"), "ada", "GDDR6X", 504, 58.3, 58.3, 116.6, 233.2, "int4", "pcie", 64, 11.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX4080", 16, ("RTX-4080", "4080", "GeForce-RTX-4080"), "ada", "GDDR6X", 716.8, 97.5, 97.5, 194.9, 389.9, "int4", "pcie", 64, 15.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX5070", 12, ("RTX-5070", "5070", "GeForce-RTX-5070"), "blackwell", "GDDR7", 672, 61.7, 61.7, 123.4, 246.7, "fp4", "pcie", 128, 11.94, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX5080", 16, ("RTX-5080", "5080", "GeForce-RTX-5080"), "blackwell", "GDDR7", 960, 112.6, 112.6, 225.1, 450.2, "fp4", "pcie", 128, 15.92, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX4000ADA", 20, ("RTX-4000-ADA", "RTX4000-Ada"), "ada", "GDDR6", 360, 81.9, 81.9, 163.8, 163.8, "int4", "pcie", 64, 19.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTX5000ADA", 32, ("RTX-5000-ADA", "RTX5000-Ada"), "ada", "GDDR6", 576, 261.1, 261.1, 522.2, 522.2, "int4", "pcie", 64, 31.99, 8, _GDDR),  # noqa: E501
    GpuSpec("RTXPRO6000", 96, ("RTX-PRO-6000", "RTX-PRO-6000-Blackwell"), "blackwell", "GDDR7", 1792, 500, 500, 1000, 1000, "fp4", "pcie", 128, 95.59, 8, _GDDR),  # noqa: E501
    GpuSpec("H200-NVL", 141, ("H200NVL",), "hopper", "HBM3e", 4800, 835.5, 835.5, 1670.5, 1670.5, None, "pcie", 128, 140.4, 8, _HBM, "H200"),  # noqa: E501
    GpuSpec("A800", 40, ("A800-40GB",), "ampere", "HBM2", 1555, 311.9, 311.9, 0, 623.8, "int4", "pcie", 64, 40.0, 8, _HBM, "A800"),  # noqa: E501
    GpuSpec("A800-80GB", 80, ("A800-PCIE-80GB",), "ampere", "HBM2e", 1935, 311.9, 311.9, 0, 623.8, "int4", "pcie", 64, 80.0, 8, _HBM, "A800"),  # noqa: E501
    GpuSpec("QUADRO-RTX6000", 24, ("Quadro-RTX-6000", "Q-RTX-6000"), "turing", "GDDR6", 672, 0, 130.5, 0, 261, "int4", "pcie", 32, 24.0, 8, _GDDR),  # noqa: E501
    GpuSpec("MI300X", 192, (), "cdna3", "HBM3", 5300, 1307, 1307, 2615, 2615, None, "infinity-fabric", 896, 191.5, 8, 0.30),  # noqa: E501
    GpuSpec("MI325X", 256, (), "cdna3", "HBM3e", 6000, 1307, 1307, 2615, 2615, None, "infinity-fabric", 896, 255.5, 8, 0.30),  # noqa: E501
)
# fmt: on

# GeForce cards: their datasheets quote the 16-bit tensor peak at the FP32-accumulate half rate and the
# boost clock, which these cards run past under load (an RTX 4090 sustains its whole 165.2 TFLOPS,
# docs/sizing.md "GDDR and PCIe cards"), unlike the power-limited workstation and datacenter GDDR
# parts; the runtime estimator gives the class one utilisation (gpuorch.sizing.runtime).
GEFORCE = frozenset({"RTX3080", "RTX3090", "RTX3090TI", "RTX4070", "RTX4080", "RTX4090", "RTX5070", "RTX5080",
                     "RTX5090"})


def is_geforce(spec: GpuSpec) -> bool:
    return spec.model in GEFORCE


def _key(name: str) -> str:
    """A name as spelled without case or separators: ``rtx-4090``, ``RTX 4090``, ``RTX_4090`` and
    ``RTX4090`` are one name (price lists and users write all of them)."""
    return re.sub(r"[\s_\-]+", "", name.strip().upper())


_BY_NAME: dict[str, GpuSpec] = {}
for _g in GPUS:
    for _n in (_g.name, *_g.aliases):
        assert _BY_NAME.get(_key(_n), _g) is _g, f"GPU name {_n!r} is ambiguous"
        _BY_NAME[_key(_n)] = _g

# Usable memory may be ~7% below the marketed size (A10G: 22.35 GiB for "24 GB").
MEMORY_TOLERANCE = 0.92


def lookup(name: str) -> GpuSpec | None:
    return _BY_NAME.get(_key(name))


def family(name: str) -> str:
    """Model family without the memory variant: ``A100-80GB`` -> ``A100``, ``H100-NVL`` -> ``H100``."""
    spec = lookup(name)
    return spec.model if spec else name.strip().upper().split("-")[0]


def is_family_name(name: str) -> bool:
    """Whether ``name`` names a whole family (``A100``, ``H100``), not one variant (``A100-80GB``,
    ``A100-40GB``, ``H100-SXM``): a job spec's ``A100`` matches every memory variant."""
    text = _key(name)
    return any(text == _key(g.model) for g in GPUS)


def variants(model: str) -> list[GpuSpec]:
    """Every variant of a family, smallest memory first (table order breaks ties)."""
    return sorted((g for g in GPUS if g.model == family(model)), key=lambda g: g.memory_gib)


def known_names() -> list[str]:
    return [g.name for g in GPUS]


def memory_matches(offered_gib: float, required_gib: float) -> bool:
    return offered_gib >= required_gib * MEMORY_TOLERANCE


# A reported size within this fraction of a variant's usable memory is that variant (AWS reports
# the A100 80GB as 81,920 MiB, GCP the L4 as 22.35 GiB).
VARIANT_TOLERANCE = 0.08


def variant_for(name: str, memory_gib: float | None) -> GpuSpec | None:
    """The variant a price list means by a model name and a per-GPU memory (``A100`` + 80 GiB ->
    ``A100-80GB``; ``H100`` + 94 -> ``H100-NVL``); None when no variant of that name has that
    memory. Without memory, the named spec. A variant name must agree with the memory given.
    Two variants of one size (A100-80GB SXM and PCIe) resolve to the first in the table: a
    price list that means the other names it."""
    spec = lookup(name)
    if spec is None or memory_gib is None or memory_gib <= 0:
        return spec
    pool = variants(spec.name) if is_family_name(name) else [spec]

    def close(g: GpuSpec) -> bool:
        return abs(memory_gib - g.usable) <= VARIANT_TOLERANCE * g.usable or \
            abs(memory_gib - g.memory_gib) <= VARIANT_TOLERANCE * g.memory_gib

    found = [g for g in pool if close(g)]
    if not found:
        return None
    return min(found, key=lambda g: (min(abs(memory_gib - g.usable), abs(memory_gib - g.memory_gib)),
                                     GPUS.index(g)))
