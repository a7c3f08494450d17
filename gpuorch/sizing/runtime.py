"""How long a workload runs on a GPU configuration (docs/sizing.md, "Runtime").

Training FLOPs per token (model FLOPs, the definition MFU tables use, recomputation excluded):
k * N + 12 * L * h * s, with k = 6 for full fine-tuning (2 forward + 4 backward, Kaplan et al.
2020) and 4 for LoRA/QLoRA (frozen weights need activation gradients but no weight gradients);
12 * L * h * s is attention's QK^T and AV, forward and backward (Chowdhery et al. 2022, app. B;
torchtitan counts it the same way), which is what makes long contexts slow.

Throughput per GPU = dense peak in the compute precision * utilisation of the GPU class
(``UTILISATION``, calibrated on tests/data/runtime-calibration.yaml) * the activation
checkpointing factor (recomputing costs time) * torch.compile's speed-up * the scaling factor of
the GPUs' link inside a node and, across nodes, of the fabric; fp8 training runs the linear layers
on fp8 tensor cores (``FP8_LINEAR_SPEEDUP`` over bf16; attention stays 16-bit). Each micro-batch
also pays what does not grow with its tokens (``step_seconds``: the HF Trainer's per-step overhead,
QLoRA's dequantisation of every frozen weight).

Inference (decode) is bandwidth-bound: each step streams the weights and the KV cache once,
so step time = max(bytes / (bandwidth * 0.75), 2*N*batch / (peak * utilisation)) and tokens/s =
batch / step time, per replica. Prefill is not modelled.
"""

from __future__ import annotations

from gpuorch.gpus import FAST_LINKS, GpuSpec, family, is_geforce
from gpuorch.sizing.fabric import Fabric, node_factor
from gpuorch.sizing.memory import weight_bytes
from gpuorch.sizing.workload import Workload

FLOPS_PER_PARAM_TOKEN = {"full": 6.0, "lora": 4.0, "qlora": 4.0}
ATTENTION_FLOPS = 12.0  # x L * h * s per token, forward + backward

# Model-FLOPs utilisation in bf16, by GPU family, of the family's full-power part (docs/sizing.md
# "Runtime"). The PCIe and NVL variants keep their family's utilisation of their own (lower,
# datasheet) peak, and GH200 is taken like H100. Families without an entry use the table's class
# default (``GpuSpec.efficiency``): an assumption, and ``calibrated`` says so.
# H100: torchtitan's H100 runs were on 500 W power-capped parts (``POWER_CURVE``), so their
# utilisation is solved against the capped peak (886 TFLOPS), not the 700 W SXM's 989.
# B200 through H100 on one stack: Megatron-Bridge's Llama 3 8B FP8 runs (700 W DGX-H100) reach 1576
# vs 744 model TFLOP/s per GPU: 0.47 * 1576/744 * 989/2250 = 0.44 (tests/data/runtime-cross-gpu.yaml).
# A800: the A100 die with NVLink cut to 400 GB/s for export (same SMs, clocks and peaks), taken like A100.
# RTX 4090 (issue 36): solved on three of LLMQ's LLaMA-Factory runs on one card (Qwen2.5 0.5B, 3B, 14B,
# benchmarks/4090x1.md at 7f895bdb); its other rows, torchtune's and Answer.AI's 4090 runs are held out
# (tests/data/runtime-calibration.yaml). Above A100's because the GeForce peak is quoted at the 2.52 GHz
# boost clock a 450 W card exceeds under tensor load, and one GPU pays no FSDP traffic.
UTILISATION = {"A100": 0.70, "A800": 0.70, "H100": 0.47, "GH200": 0.47, "H200": 0.55, "B200": 0.44, "RTX4090": 0.94}
# The GeForce class (gpus.GEFORCE: the same half-rate, boost-clock datasheet convention) takes the 4090's
# figure, uncalibrated on each other card (``calibrated`` says so): left at the GDDR default, a 5090 would
# rank 2.5x slower than the 4090 it outruns. Not carried to the workstation and datacenter GDDR parts:
# the L40S (350 W) and RTX 6000 Ada (300 W) quote the 4090's die at its full rate, twice the 4090's
# figure, under less power, the L4 121 TFLOPS in 72 W, and no run of theirs passes the plausibility
# rule (docs/sizing.md "GDDR and PCIe cards"), so they keep the class default ``GpuSpec.efficiency``.
GEFORCE_UTILISATION = UTILISATION["RTX4090"]
# Dense BF16 peak against board power across one die's parts (NVIDIA datasheets: H100 PCIe 350 W,
# 756 TFLOPS; H100 NVL 400 W, 835; H100 SXM 700 W, 989): a part capped below its rating runs at the
# peak interpolated at its cap (a 500 W H100 SXM: 886).
POWER_CURVE: dict[str, tuple[tuple[float, float], ...]] = {
    "H100": ((350.0, 756.0), (400.0, 835.0), (700.0, 989.0)),
}


def capped_tflops(gpu: GpuSpec, watts: float) -> float:
    """The BF16 peak of ``gpu`` run at a ``watts`` power limit (its datasheet peak when not capped below)."""
    curve = POWER_CURVE.get(family(gpu.name))
    if not curve or watts >= curve[-1][0]:
        return gpu.bf16_tflops
    if watts <= curve[0][0]:
        return curve[0][1] * watts / curve[0][0]
    for (w0, t0), (w1, t1) in zip(curve, curve[1:], strict=False):
        if w0 <= watts <= w1:
            return min(gpu.bf16_tflops, t0 + (t1 - t0) * (watts - w0) / (w1 - w0))
    return gpu.bf16_tflops  # pragma: no cover - the curve is sorted


def calibrated(w: Workload, gpu: GpuSpec) -> bool:
    """Whether the speed on ``gpu`` rests on published measurements (or the job's own efficiency)
    rather than the GPU class's assumed default."""
    return w.efficiency is not None or family(gpu.name) in UTILISATION


AC_SPEED = {"none": 1.0, "selective": 0.9, "full": 0.8}  # share of speed left after recomputation
COMPILE_SPEED = 1.15  # torch.compile (torchtitan Table 1: 6,667 vs 5,762 TPS/GPU)
# float8 speeds up the linear layers only; attention (FlashAttention) stays bf16. Solved from
# torchtitan Table 1 (Llama 3.1 8B, 8k: 8,532 vs 6,667 TPS/GPU, attention 21% of the FLOPs):
# (48.2/x + 12.9) / 61.1 = 6,667 / 8,532 gives x = 1.38.
FP8_LINEAR_SPEEDUP = 1.38
# Costs of one micro-batch that do not grow with its tokens (seconds per GPU per micro-batch), so
# they weigh on short sequences and small batches (docs/sizing.md "Runtime"):
# - HF Trainer-based stacks (hf, axolotl, llama-factory, unsloth) spend STEP_OVERHEAD_S on each
#   micro-batch outside the matmuls (the Trainer's loop, PEFT's hooks, checkpointing's re-entry):
#   solved on Qwen's README table (QwenLM/Qwen at 85cb093, one A100, Qwen-7B LoRA at 256 tokens:
#   1.2 s per 8 micro-batches, where the matmuls take 0.07 s of each 0.15). torchtune and torchtitan
#   have none here: their factors were solved on runs of 8,192+ tokens a micro-batch, which hold it.
# - QLoRA dequantises every frozen weight on each pass of each micro-batch, whatever its tokens:
#   DEQUANT_S_PER_PARAM x parameters. Solved on Qwen-7B Q-LoRA at 2,048 tokens (7.0 s per 8 against
#   LoRA's 5.2: GPTQ int4 through auto-gptq under the HF Trainer) for every stack but torchtune, and
#   on torchtune's QLoRA row (torchao NF4, compiled: 8,035 tok/s against LoRA's 8,210 at 8,192
#   tokens a micro-batch) for torchtune. This replaces a flat 0.7 speed factor, which could not say
#   why QLoRA catches up with LoRA as micro-batches grow (Qwen's table at 8,192 tokens; torchtune's).
HF_TRAINER_STACKS = frozenset({"hf", "axolotl", "llama-factory", "unsloth"})
STEP_OVERHEAD_S = 0.084
DEQUANT_S_PER_PARAM = {"torchtune": 6.5e-12}
DEQUANT_S_PER_PARAM_DEFAULT = 2.8e-11
# Fine-tuning stacks reach less of the peak than the pretraining runs ``UTILISATION`` was solved on
# (torchtitan, 8B-70B over 64 GPUs). Solved on torchtune's single-A100 table (README at a9ea6d5b,
# "Optimization flags", Llama 3.2 3B, batch 2 x 4096 packed): its compiled full fine-tune runs
# 8,998 tok/s where torchtitan's A100 utilisation gives 10,686, so 0.84; the table's other full
# fine-tuning rows are held out (tests/data/runtime-calibration.yaml). torchtitan keeps 1.0 (its own
# runs); a stack without a measurement of its own (hf, unsloth, axolotl, llama-factory) takes
# torchtune's figure, an assumption.
STACK_SPEED = {"torchtitan": 1.0}
FINETUNE_STACK_SPEED = 0.84
# LoRA/QLoRA reach less of the peak than full fine-tuning: the adapters' small matmuls, their dropout
# and the casts between adapter and base dtypes are work the k = 4 FLOPs count leaves out. Solved on
# the same table's LoRA row (8,210 tok/s against 7,210 for the full fine-tune with the same
# checkpointing, compile and loss: a measured ratio of 1.14 where k = 4 against 6 gives 1.38).
# Held out: the LoRA paper's 25% training speed-up on GPT-3 175B (Hu et al. 2021, section 4.2).
LORA_SPEED = 0.83
BANDWIDTH_EFFICIENCY = 0.75

# Scaling per GPU relative to one GPU. Inside a node, by link: NVLink / Infinity Fabric, PCIe
# (PCIe-only multi-GPU stalls on all-reduce, worse when the weights travel too: ZeRO-3, FSDP, TP).
SCALE_FAST, SCALE_PCIE, SCALE_PCIE_SHARDED = 0.95, 0.70, 0.55
# Across nodes: the strategy's traffic over the fabric (``fabric.node_factor``).


def utilisation(w: Workload, gpu: GpuSpec) -> float:
    if w.efficiency:
        return w.efficiency
    default = GEFORCE_UTILISATION if is_geforce(gpu) else gpu.efficiency
    return UTILISATION.get(family(gpu.name), default)


def method_stack_speed(w: Workload) -> float:
    """The share of the calibrated utilisation the job's stack and method keep (``STACK_SPEED``,
    ``LORA_SPEED``); 1.0 when the job states its own ``efficiency``, which already says it."""
    if w.efficiency is not None:
        return 1.0
    adapters = LORA_SPEED if w.method in ("lora", "qlora") else 1.0
    return STACK_SPEED.get(w.stack, FINETUNE_STACK_SPEED) * adapters


def step_seconds(w: Workload) -> float:
    """Seconds each GPU spends on one micro-batch whatever its tokens (``STEP_OVERHEAD_S``, QLoRA's
    dequantisation); 0 when the job states its own ``efficiency``, which already says it."""
    if w.efficiency is not None:
        return 0.0
    overhead = STEP_OVERHEAD_S if w.stack in HF_TRAINER_STACKS else 0.0
    if w.method == "qlora":
        overhead += w.n_params * DEQUANT_S_PER_PARAM.get(w.stack, DEQUANT_S_PER_PARAM_DEFAULT)
    return overhead


def _with_step_costs(w: Workload, rate: float) -> float:
    """A GPU's tokens per second once each micro-batch also pays ``step_seconds``."""
    extra = step_seconds(w)
    if extra <= 0 or rate <= 0:
        return rate
    tokens = w.seq_len * w.micro_batch
    return tokens / (tokens / rate + extra)


def flops_per_token(w: Workload) -> float:
    s = w.shape
    return FLOPS_PER_PARAM_TOKEN[w.method] * w.n_params + ATTENTION_FLOPS * s.layers * s.hidden * w.seq_len


def training_flops(w: Workload, tokens: float) -> float:
    return flops_per_token(w) * tokens


def scaling(gpus: int, link: str | None, sharding: str) -> float:
    """Per-GPU efficiency of a multi-GPU job inside one node relative to one GPU (the nodes of a
    multi-node job lose what ``fabric.node_factor`` says on top)."""
    if gpus <= 1:
        return 1.0
    if link in FAST_LINKS:
        return SCALE_FAST
    if sharding in ("zero3", "fsdp", "tp"):
        return SCALE_PCIE_SHARDED
    return SCALE_PCIE


def _bf16_tflops(w: Workload, gpu: GpuSpec, gpus: int, link: str | None, sharding: str) -> float:
    """TFLOPS one node's ``gpus`` sustain at the 16-bit rate (0: the GPU cannot run the precision)."""
    precision = w.compute_precision
    if precision == "fp8" and gpu.fp8_tflops <= 0:
        return 0.0
    peak = gpu.tflops("bf16" if precision == "fp8" else precision)
    speed = AC_SPEED[w.ac_mode] * (COMPILE_SPEED if w.knobs.compile else 1.0)
    speed *= method_stack_speed(w)
    return gpus * peak * utilisation(w, gpu) * speed * scaling(gpus, link, sharding)


def _work_per_token(w: Workload) -> float:
    """FLOPs per token at the 16-bit rate: with fp8 the linear layers' share runs FP8_LINEAR_SPEEDUP
    times faster, attention does not."""
    s = w.shape
    linear = FLOPS_PER_PARAM_TOKEN[w.method] * w.n_params
    attention = ATTENTION_FLOPS * s.layers * s.hidden * w.seq_len
    return (linear / FP8_LINEAR_SPEEDUP if w.compute_precision == "fp8" else linear) + attention


def training_tokens_per_s(
    w: Workload, gpu: GpuSpec, gpus: int = 1, link: str | None = None, sharding: str = "none", nodes: int = 1,
    fabric: Fabric | None = None,
) -> float:
    """Tokens per second of the whole configuration: ``gpus`` in all, over ``nodes`` nodes joined
    by ``fabric`` (None: unknown, taken as plain 100 Gb/s Ethernet)."""
    nodes = max(1, min(nodes, gpus))
    per_node = gpus // nodes
    per_gpu = _with_step_costs(w, _bf16_tflops(w, gpu, per_node, link, sharding) * 1e12 / _work_per_token(w) / per_node)
    return gpus * per_gpu * node_factor(w, sharding, nodes, fabric, per_gpu)


def training_tflops(
    w: Workload, gpu: GpuSpec, gpus: int, link: str | None, sharding: str, nodes: int = 1,
    fabric: Fabric | None = None,
) -> float:
    """Model TFLOPS the whole configuration sustains (the MFU tables' numerator)."""
    return training_tokens_per_s(w, gpu, gpus, link, sharding, nodes, fabric) * flops_per_token(w) / 1e12


def decode_tokens_per_s(
    w: Workload, gpu: GpuSpec, gpus: int = 1, link: str | None = None, sharding: str = "none"
) -> float:
    shape = w.shape
    kv = 2 * shape.layers * shape.kv_dim * w.seq_len * w.micro_batch * w.kv_bytes / 2  # half-full on average
    eff = utilisation(w, gpu)
    tp = w.strategy.degree or gpus if sharding == "tp" else 1
    tp = max(1, min(tp, gpus))
    scale = scaling(tp, link, sharding)
    memory_s = (weight_bytes(w) + kv) / (tp * gpu.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY * scale)
    peak = gpu.tflops(w.compute_precision) or gpu.fp16_tflops
    compute_s = 2 * w.n_params * w.micro_batch / (tp * peak * 1e12 * eff * scale)
    replicas = max(1, gpus // tp)  # tensor x data parallel: the offer's other GPUs serve more replicas
    return replicas * w.micro_batch / max(memory_s, compute_s)


def estimate_hours(
    w: Workload, gpu: GpuSpec, gpus: int = 1, link: str | None = None, sharding: str = "none", nodes: int = 1,
    fabric: Fabric | None = None,
) -> float | None:
    """Hours of work (without start-up) on this configuration (``gpus`` in all over ``nodes``);
    None when ``w`` states neither ``tokens`` nor ``duration``. Inference nodes serve replicas."""
    if w.duration is not None:
        return w.duration / 3600
    if w.tokens is None:
        return None
    if not w.training:
        nodes = max(1, min(nodes, gpus))
        return w.tokens / (nodes * decode_tokens_per_s(w, gpu, gpus // nodes, link, sharding)) / 3600
    rate = training_tokens_per_s(w, gpu, gpus, link, sharding, nodes, fabric)
    if rate <= 0:
        return None
    return w.tokens / rate / 3600
