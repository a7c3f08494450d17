"""GPU memory of a workload, per GPU, by component. Every constant is sourced in docs/sizing.md.

Bytes per parameter (N parameters, T trainable LoRA parameters, E embedding parameters):

- weights: 2 for bf16/fp16 (also for fp8 training: Transformer Engine keeps 16-bit weights),
  1 for fp8/int8 inference, 0.52 for int4 (GPTQ/AWQ, group 128), 0.516 for QLoRA's NF4 with
  double quantisation (0.127 bits/param of constants, Dettmers et al. 2023). Quantisers keep
  the E embedding and LM-head parameters in 16-bit.
- full fine-tuning, mixed-precision Adam (ZeRO paper, Rajbhandari et al. 2020):
  2N weights + 2N gradients + (4N fp32 master + 8N Adam m, v) optimizer = 16N bytes.
  adamw-8bit keeps m, v in 1 byte each (2N); SGD with momentum keeps 4N.
- LoRA / QLoRA: the frozen base as above, plus fp32 adapters: 4T weights, 4T gradients and
  the optimizer state of T (8T for Adam) -- 16 bytes per trainable parameter.
- activations (training, FlashAttention so no s^2 term; Korthikanti et al. 2022):
  34*s*b*h bytes per layer; with gradient checkpointing 2*s*b*h per layer (its input) plus
  one layer recomputed (34*s*b*h); plus fp32 logits 4*s*b*V.
- KV cache (inference): 2 (K and V) * L * kv_heads * head_dim * s * b * bytes (2; 1 for fp8).
- sharding over n GPUs: ZeRO-2 divides gradients and optimizer state by n, ZeRO-3/FSDP also the
  weights (plus two gathered layers in flight); tensor parallelism divides weights and KV cache.
- overhead: 1 GiB per GPU (CUDA context, cuBLAS/NCCL workspaces); headroom: 8% on top of
  everything for allocator fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuorch.sizing.workload import Workload

GIB = float(1 << 30)
OVERHEAD_GIB = 1.0
HEADROOM = 0.08

NF4_BYTES = 0.5 + 0.127 / 8
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.52}
GRAD_BYTES = 2.0
MASTER_BYTES = 4.0
OPTIMIZER_BYTES = {"adamw": 8.0, "adamw-8bit": 2.0, "sgd": 4.0}
ADAPTER_BYTES = 4.0  # fp32 LoRA weights, and again for their gradients
ACT_LAYER = 34  # bytes per token per hidden unit per layer (16-bit, FlashAttention)
ACT_CHECKPOINT = 2  # bytes per token per hidden unit kept per layer with checkpointing
LOGIT_BYTES = 4.0

COMPONENTS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "adapters", "overhead", "headroom")


@dataclass(frozen=True)
class MemoryEstimate:
    gpus: int
    sharding: str  # none | zero2 | zero3 | tp
    breakdown: dict[str, float]  # GiB per GPU, keys: COMPONENTS

    @property
    def per_gpu_gib(self) -> float:
        return sum(self.breakdown.values())

    @property
    def total_gib(self) -> float:
        return self.per_gpu_gib * self.gpus


def weight_bytes(w: Workload) -> float:
    """Bytes of the whole model's weights as loaded for this method and precision."""
    n = w.n_params
    if w.method == "qlora":
        per = NF4_BYTES
    elif w.method == "full":
        per = 2.0
    else:
        per = WEIGHT_BYTES[w.precision]
    if per >= 2.0:
        return n * per
    embed = min(float(w.shape.embedding_params), n)
    return (n - embed) * per + embed * 2.0


def sharding_options(w: Workload, gpus: int) -> tuple[str, ...]:
    """Ways to spread the job over ``gpus`` GPUs, cheapest communication first."""
    if gpus <= 1:
        return ("none",)
    if not w.training:
        return ("none",) if w.sharding == "none" else ("none", "tp") if w.sharding == "auto" else ("tp",)
    if w.sharding == "auto":
        return ("none", "zero2", "zero3")
    return ("zero3",) if w.sharding == "fsdp" else (w.sharding,)


def estimate_memory(w: Workload, gpus: int = 1, sharding: str | None = None) -> MemoryEstimate:
    """Per-GPU memory of ``w`` spread over ``gpus`` GPUs; ``sharding`` defaults to the most
    sharded option ``w`` allows (the smallest per-GPU figure)."""
    mode = sharding or sharding_options(w, gpus)[-1]
    shape, n = w.shape, w.n_params
    tokens = w.seq_len * w.micro_batch
    weights = weight_bytes(w)
    grads = opt = adapters = act = kv = 0.0
    if w.method == "full":
        grads = GRAD_BYTES * n
        opt = (MASTER_BYTES + OPTIMIZER_BYTES[w.optimizer]) * n
    elif w.training:
        t = w.trainable_params
        adapters, grads, opt = ADAPTER_BYTES * t, ADAPTER_BYTES * t, OPTIMIZER_BYTES[w.optimizer] * t
    if w.training:
        kept = ACT_CHECKPOINT * shape.layers + ACT_LAYER if w.checkpointing else ACT_LAYER * shape.layers
        act = tokens * shape.hidden * kept + LOGIT_BYTES * tokens * shape.vocab
    else:
        kv = 2 * shape.layers * shape.kv_dim * tokens * (1.0 if w.precision == "fp8" else 2.0)
        # One layer's transient prefill buffers (q,k,v, attention out, gate/up/act) + last logits.
        act = 2 * tokens * (2 * shape.hidden + 2 * shape.kv_dim + 3 * shape.intermediate)
        act += LOGIT_BYTES * w.micro_batch * shape.vocab
    if mode in ("zero2", "zero3"):
        grads, opt = grads / gpus, opt / gpus
    if mode == "zero3":
        gathered = 2 * shape.layer_params * weights / n  # current + prefetched layer
        weights, adapters = weights / gpus + gathered, adapters / gpus
    elif mode == "tp":
        weights, kv, act = weights / gpus, kv / gpus, act / gpus
    parts = {"weights": weights, "gradients": grads, "optimizer": opt, "activations": act, "kv_cache": kv,
             "adapters": adapters}
    out = {k: v / GIB for k, v in parts.items()}
    out["overhead"] = OVERHEAD_GIB
    out["headroom"] = HEADROOM * sum(out.values())
    return MemoryEstimate(gpus, mode, out)


def checkpoint_bytes(w: Workload) -> float:
    """What a resumable checkpoint holds: full fine-tuning saves 16-bit weights plus the fp32
    master and optimizer state; LoRA saves only the adapters and their optimizer state;
    inference keeps no state."""
    if w.method == "full":
        return (2.0 + MASTER_BYTES + OPTIMIZER_BYTES[w.optimizer]) * w.n_params
    if w.training:
        return (ADAPTER_BYTES + OPTIMIZER_BYTES[w.optimizer]) * w.trainable_params
    return 0.0
