"""How long a workload runs on a GPU configuration (docs/sizing.md, "Runtime").

Training: FLOPs = k * N * tokens with k = 6 for full fine-tuning (2 forward + 4 backward,
Kaplan et al. 2020), 4 for LoRA/QLoRA (frozen weights need no weight gradients, only the
activation gradients), plus 2 when activations are recomputed (gradient checkpointing).
Throughput = n GPUs * dense peak in the compute precision * MFU (per GPU class, overridable)
* a scaling factor (NVLink / Infinity Fabric 0.92 per GPU, PCIe-only 0.70, or 0.55 when the
weights themselves travel over PCIe with ZeRO-3 or tensor parallelism; x0.90 across nodes),
and * 0.7 for QLoRA's NF4 dequantisation.

Inference (decode) is bandwidth-bound: each step streams the weights and the KV cache once,
so step time = max(bytes / (bandwidth * 0.75), 2*N*batch / (peak * MFU)) and tokens/s =
batch / step time. Prefill is not modelled.
"""

from __future__ import annotations

from gpuorch.gpus import FAST_LINKS, GpuSpec
from gpuorch.sizing.memory import weight_bytes
from gpuorch.sizing.workload import Workload

FLOPS_PER_PARAM_TOKEN = {"full": 6.0, "lora": 4.0, "qlora": 4.0}
RECOMPUTE_FLOPS = 2.0
QLORA_SPEED = 0.7
BANDWIDTH_EFFICIENCY = 0.75
SCALE_FAST, SCALE_PCIE, SCALE_PCIE_SHARDED, SCALE_NODES = 0.92, 0.70, 0.55, 0.90


def training_flops(w: Workload, tokens: float) -> float:
    k = FLOPS_PER_PARAM_TOKEN[w.method] + (RECOMPUTE_FLOPS if w.checkpointing else 0.0)
    return k * w.n_params * tokens


def scaling(gpus: int, link: str | None, sharding: str, nodes: int = 1) -> float:
    """Per-GPU efficiency of a multi-GPU job relative to one GPU."""
    if gpus <= 1:
        return 1.0
    if link in FAST_LINKS:
        s = SCALE_FAST
    elif sharding in ("zero3", "tp"):
        s = SCALE_PCIE_SHARDED
    else:
        s = SCALE_PCIE
    return s * (SCALE_NODES if nodes > 1 else 1.0)


def training_tflops(
    w: Workload, gpu: GpuSpec, gpus: int, link: str | None, sharding: str, nodes: int = 1
) -> float:
    eff = w.efficiency or gpu.efficiency
    speed = QLORA_SPEED if w.method == "qlora" else 1.0
    return gpus * gpu.tflops(w.compute_precision) * eff * scaling(gpus, link, sharding, nodes) * speed


def decode_tokens_per_s(
    w: Workload, gpu: GpuSpec, gpus: int = 1, link: str | None = None, sharding: str = "none"
) -> float:
    shape = w.shape
    kv_bytes = 1.0 if w.precision == "fp8" else 2.0
    kv = 2 * shape.layers * shape.kv_dim * w.seq_len * w.micro_batch * kv_bytes / 2  # half-full on average
    eff = w.efficiency or gpu.efficiency
    split = gpus if sharding == "tp" else 1
    scale = scaling(gpus, link, sharding)
    memory_s = (weight_bytes(w) + kv) / (split * gpu.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY * scale)
    peak = gpu.tflops(w.compute_precision) or gpu.fp16_tflops
    compute_s = 2 * w.n_params * w.micro_batch / (split * peak * 1e12 * eff * scale)
    replicas = gpus if sharding != "tp" else 1
    return replicas * w.micro_batch / max(memory_s, compute_s)


def estimate_hours(
    w: Workload, gpu: GpuSpec, gpus: int = 1, link: str | None = None, sharding: str = "none", nodes: int = 1
) -> float | None:
    """Hours of work (without start-up) on this configuration; None when ``w`` states neither
    ``tokens`` nor ``duration``."""
    if w.duration is not None:
        return w.duration / 3600
    if w.tokens is None:
        return None
    if not w.training:
        return w.tokens / decode_tokens_per_s(w, gpu, gpus, link, sharding) / 3600
    tflops = training_tflops(w, gpu, gpus, link, sharding, nodes)
    if tflops <= 0:
        return None
    return training_flops(w, w.tokens) / (tflops * 1e12) / 3600
