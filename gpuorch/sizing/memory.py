"""GPU memory of a workload, per GPU, by component. Formulas, constants and their sources are in
docs/sizing.md ("Memory formulas"); the constants marked "calibrated" were fitted on the published
measurements in tests/data/sizing-calibration.yaml and checked on tests/data/sizing-holdout.yaml.

Bytes per parameter (N parameters, T trainable LoRA parameters, E embedding parameters):

- weights: 2 for bf16/fp16 (also for fp8 training: Transformer Engine / torchao keep 16-bit
  weights), 1 for fp8/int8 inference, 0.52 for int4 (GPTQ/AWQ, group 128), 0.516 for QLoRA's NF4
  with double quantisation (Dettmers et al. 2023). Quantisers keep the E embedding parameters 16-bit.
- full fine-tuning: 2N weights + 2N gradients, + 4N fp32 master (``master_weights``, the default),
  + the optimizer state: Adam m, v in ``optimizer_state_dtype`` (8N fp32, 4N bf16), 2N for 8-bit
  Adam, one state for SGD. Paged optimizers (bitsandbytes) keep their state in CUDA unified memory
  that pages out to the host under pressure: it is not charged to the GPU.
- LoRA / QLoRA: the frozen base as above, plus the adapters and their gradients in
  ``adapter_dtype`` and the optimizer state of T; with ``offload: params`` (FSDP CPU offload,
  ZeRO-3 offload_param) only the two layers in flight and the LM head stay on the GPU.
- sharding over n GPUs, as the implementations' own estimators compute it:
  ZeRO-2 (DeepSpeed ``estimate_zero2_model_states_mem_needs``): 4N + 16N/n with mixed-precision
  Adam (16-bit weights and gradients whole; fp32 master, m, v and an fp32 gradient partition
  sharded); ZeRO-3 (``estimate_zero3_model_states_mem_needs``): 4 x largest layer + 18N/n;
  FSDP (PyTorch FSDP2): every sharded state / n plus two unsharded layers in flight; a frozen
  base is sharded in its storage dtype. Offloading the optimizer (ZeRO-Offload, FSDP CPU offload)
  leaves DeepSpeed's 2N (16-bit weights) on the GPU; offloading parameters leaves the gathered layers.
- activations (training, FlashAttention so no s^2 term), per token per layer, bf16: the tensors a
  Llama block saves for backward, 12h + 4kv + 8i bytes, x ``ACT_SCALE``; selective checkpointing
  keeps ``SELECTIVE_KEEP`` of them; full checkpointing keeps the 2h-byte layer input and recomputes
  one layer at a time; offloaded activations keep only the layers in flight.
- the loss: logits and their gradient, ``LOSS_BYTES[loss]`` bytes per token per vocabulary entry.
- KV cache (inference): 2 (K and V) * L * kv_dim * tokens * (2, or 1 for fp8), exact (vLLM's
  block arithmetic); prefill runs in chunks of ``max_batched_tokens`` (vLLM's chunked prefill).
- overhead: the CUDA context (outside PyTorch's allocator) plus cuBLAS/NCCL workspaces.

A fit leaves ``HEADROOM`` of the usable memory free (``fits``): an estimate inside that margin is
refused, because fragmentation and allocator rounding eat it in real runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuorch.sizing.workload import Workload

GIB = float(1 << 30)

NF4_BYTES = 0.5 + 0.127 / 8
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.52}
GRAD_BYTES = 2.0
MASTER_BYTES = 4.0
ZERO_GRAD_PARTITION = 4.0  # DeepSpeed keeps an fp32 partition of the gradients next to the master copy
STATE_BYTES = {"fp32": 4.0, "bf16": 2.0}
ADAPTER_BYTES = {"fp32": 4.0, "bf16": 2.0}

# Calibrated on tests/data/sizing-calibration.yaml (docs/sizing.md, "Calibration").
ACT_SCALE = 1.3  # x (12h + 4kv + 8i) bytes per token per layer: RoPE, norm and allocator temporaries
SELECTIVE_KEEP = 0.3  # share of a layer's activations selective (op or every-other-layer) AC keeps
ACT_CKPT_BYTES = 2.0  # bytes per token per hidden unit kept per layer with full checkpointing
COMPILE_ACT = 0.9  # torch.compile fuses elementwise ops and saves fewer intermediates
COMPILE_LOSS = 0.8  # ... and fuses the loss's fp32 upcast into the cross-entropy kernel
LOSS_BYTES = {"eager": 17.0, "chunked": 2.0, "fused": 0.0}  # per token per vocab entry
INFER_ACT = 2.2  # x 2 * (2h + 2kv + 3i) bytes per prefill token: one layer's buffers
CONTEXT_GIB = 0.5  # CUDA context: outside PyTorch's allocator, so torch's peak never shows it
WORKSPACE_GIB = 0.5  # cuBLAS / cuDNN workspaces and allocator slack
NCCL_GIB = 0.5  # one communicator's buffers per GPU when several GPUs talk (outside PyTorch's allocator too)
# A vLLM tensor-parallel worker holds three NCCL communicators by the time it profiles memory: the
# world process group's (the worker's warm-up all_reduce), the TP group's PyNcclCommunicator (created
# and warmed up in its constructor), and the TP group's own process group, which the profile run's
# prefill all-reduces take (PyNccl is disabled outside CUDA graphs and the custom all-reduce takes
# inputs up to 8 MiB; an 8,192-token prefill of a 4,096-wide model all-reduces 64 MiB):
# vllm/distributed/parallel_state.py, worker.py, device_communicators/pynccl.py. A training job's
# process group holds one.
VLLM_TP_COMMUNICATORS = 3
HEADROOM = 0.05  # share of usable memory a fit leaves free

# vLLM's default max_num_batched_tokens for `vllm serve` (chunked prefill): 8192 on cards with 70 GiB
# or more, 2048 below (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults; it also keeps A100s
# at 2048, which gpuorch, not knowing the card's name here, does not: conservative).
DEFAULT_BATCHED_TOKENS, DEFAULT_BATCHED_TOKENS_SMALL, LARGE_CARD_GIB = 8192, 2048, 70.0

COMPONENTS = ("weights", "gradients", "optimizer", "adapters", "activations", "logits", "kv_cache", "overhead")


@dataclass(frozen=True)
class MemoryEstimate:
    gpus: int
    sharding: str  # none | ddp | zero2 | zero3 | fsdp | tp
    breakdown: dict[str, float]  # GiB per GPU, keys: COMPONENTS

    @property
    def per_gpu_gib(self) -> float:
        return sum(self.breakdown.values())

    @property
    def total_gib(self) -> float:
        return self.per_gpu_gib * self.gpus


def allowed_gib(usable_gib: float) -> float:
    """What an estimate may use on a card with ``usable_gib``: the usable memory less the headroom."""
    return usable_gib * (1.0 - HEADROOM)


def fits(est: MemoryEstimate, usable_gib: float) -> bool:
    return est.per_gpu_gib <= allowed_gib(usable_gib)


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
    # PEFT's prepare_model_for_kbit_training (the fp32-adapter QLoRA stack) casts the modules it did
    # not quantise (embeddings, LM head, norms) to fp32; torchtune and Unsloth keep them 16-bit.
    keep = 4.0 if w.method == "qlora" and w.knobs.adapter_dtype == "fp32" else 2.0
    return (n - embed) * per + embed * keep


def state_bytes(w: Workload) -> float:
    """Optimizer state per trainable parameter, as held on the GPU (paged: none)."""
    opt = w.knobs.optimizer
    if opt.startswith("paged-"):
        return 0.0
    if opt == "adamw-8bit":
        return 2.0
    per = STATE_BYTES[w.knobs.optimizer_state_dtype]
    return per if opt == "sgd" else 2 * per


def sharding_options(w: Workload, gpus: int) -> tuple[str, ...]:
    """Ways to spread ``w`` over ``gpus`` GPUs: its declared strategy, or (``sharding: auto`` in
    ``gpuorch estimate``) every one, cheapest communication first."""
    if gpus <= 1:
        return ("none",)
    declared = w.strategy.strategy
    if declared != "none":
        return (declared,)
    if w.distributed is not None:  # declared none: one GPU's memory, whatever the offer has
        return ("none",)
    if not w.training:
        return ("none",) if w.sharding == "none" else ("none", "tp")
    return ("ddp",) if w.sharding == "none" else ("ddp", "zero2", "zero3")


def _largest_layer(w: Workload) -> float:
    """Parameters of the largest module (DeepSpeed's ``largest_layer_params``): the embedding or
    LM head for large vocabularies, else one block's largest projection."""
    s = w.shape
    return float(max(s.vocab * s.hidden, s.hidden * s.intermediate))


def _model_states(w: Workload, n: int, mode: str) -> dict[str, float]:
    """Weights, gradients, optimizer and adapter bytes per GPU."""
    parts = _states(w, n, mode)
    if w.knobs.optimizer_in_backward and w.method == "full":  # gradients live one layer at a time
        parts["gradients"] = min(parts["gradients"], GRAD_BYTES * w.shape.layer_params)
    return parts


def _states(w: Workload, n: int, mode: str) -> dict[str, float]:
    shape, total = w.shape, w.n_params
    weights = weight_bytes(w)
    off = set(w.knobs.offload)
    if w.method == "full":
        master = MASTER_BYTES if w.uses_master else 0.0
        state = state_bytes(w)
        partition = ZERO_GRAD_PARTITION if w.uses_master else 0.0
        layer_grad = (MASTER_BYTES if w.uses_master else GRAD_BYTES) * shape.layer_params  # before reduce-scatter
        if "params" in off:
            # FSDP CPU offload / ZeRO-3 offload_param: everything on the host but the layers in flight.
            return {"weights": 4.0 * _largest_layer(w), "gradients": layer_grad, "optimizer": 0.0, "adapters": 0.0}
        if mode == "zero3":  # 4 x largest layer + (2 + master + state + fp32 gradient partition) N / n
            opt = 0.0 if "optimizer" in off else (master + state + partition) * total / n
            return {"weights": 4.0 * _largest_layer(w) + 2.0 * total / n, "gradients": 0.0, "optimizer": opt,
                    "adapters": 0.0}  # fmt: skip
        if mode == "fsdp":
            param = MASTER_BYTES if w.uses_master else 2.0  # FSDP2 shards the fp32 master as the parameter
            grad = MASTER_BYTES if w.uses_master else GRAD_BYTES
            gathered = 2 * 2.0 * max(shape.layer_params, shape.vocab * shape.hidden)
            opt = 0.0 if "optimizer" in off else state * total / n
            return {"weights": param * total / n + gathered, "gradients": grad * total / n + layer_grad,
                    "optimizer": opt, "adapters": 0.0}  # fmt: skip
        if mode == "tp":
            opt = 0.0 if "optimizer" in off else (master + state) * total / n
            return {"weights": weights / n, "gradients": GRAD_BYTES * total / n, "optimizer": opt, "adapters": 0.0}
        if "optimizer" in off:  # ZeRO-Offload: DeepSpeed's estimator leaves 2N on the GPU
            return {"weights": weights, "gradients": 0.0, "optimizer": 0.0, "adapters": 0.0}
        opt = master + state
        if mode == "zero2":
            return {"weights": weights, "gradients": GRAD_BYTES * total,
                    "optimizer": (opt + partition) * total / n, "adapters": 0.0}  # fmt: skip
        return {"weights": weights, "gradients": GRAD_BYTES * total, "optimizer": opt * total, "adapters": 0.0}
    if not w.training:
        return {"weights": weights / (n if mode == "tp" else 1), "gradients": 0.0, "optimizer": 0.0, "adapters": 0.0}
    t = w.trainable_params
    a = ADAPTER_BYTES[w.knobs.adapter_dtype]
    adapters, grads, opt = a * t, a * t, (0.0 if "optimizer" in off else state_bytes(w) * t)
    if "params" in off:  # FSDP CPU offload / ZeRO-3 offload_param: the host holds the base, adapters and state
        embed = min(float(shape.embedding_params), total)
        head = weights * embed / total / (1 if shape.tied_embeddings else 2)  # LM head (or tied embedding)
        per_layer = (weights - weights * embed / total) / max(shape.layers, 1)
        flight = 2 / max(shape.layers, 1)  # the layer computing and the one prefetched
        return {"weights": 2 * per_layer + head, "gradients": grads * flight, "optimizer": 0.0,
                "adapters": adapters * flight}  # fmt: skip
    if mode in ("zero3", "fsdp", "tp"):
        per_layer = weights / max(shape.layers, 1)
        gathered = 2 * per_layer if mode != "tp" else 0.0
        base = weights / n + gathered
        return {"weights": base, "gradients": grads / n, "optimizer": opt / n, "adapters": adapters / n}
    if mode == "zero2":
        return {"weights": weights, "gradients": grads, "optimizer": opt / n, "adapters": adapters}
    return {"weights": weights, "gradients": grads, "optimizer": opt, "adapters": adapters}


def layer_activation_bytes(w: Workload, tokens: float) -> float:
    """What one Llama block saves for its backward pass, bf16, FlashAttention: the inputs of the
    norms and projections, q/k/v and the attention output (12h + 4kv), the MLP's gate, up, their
    activation and product (8i)."""
    s = w.shape
    return ACT_SCALE * tokens * (12 * s.hidden + 4 * s.kv_dim + 8 * s.intermediate)


def _training_activations(w: Workload, mode: str, n: int) -> tuple[float, float]:
    """(activations, logits) bytes per GPU for one micro-batch."""
    s = w.shape
    tokens = float(w.seq_len * w.micro_batch)
    layer = layer_activation_bytes(w, tokens)
    offloaded = "activations" in w.knobs.offload
    ac = w.ac_mode
    if ac == "full":
        kept = 0.0 if offloaded else ACT_CKPT_BYTES * tokens * s.hidden * s.layers
        act = kept + layer  # one layer recomputed at a time
    elif offloaded:
        act = 2 * layer  # the layer computing and the one being copied out
    else:
        act = layer * s.layers * (SELECTIVE_KEEP if ac == "selective" else 1.0)
    loss = LOSS_BYTES[w.loss_mode] * tokens * s.vocab
    if w.knobs.compile:
        act, loss = act * COMPILE_ACT, loss * COMPILE_LOSS
    if mode == "tp":  # Megatron TP without sequence parallelism: norms and residuals stay whole
        act *= 0.3 + 0.7 / n
    return act, loss


def batched_tokens(w: Workload, card_gib: float | None = None) -> int:
    """Tokens per prefill step: the workload's ``max_batched_tokens``, else vLLM's default for the
    card (the larger one when the card is not known)."""
    if w.max_batched_tokens is not None:
        return w.max_batched_tokens
    small = card_gib is not None and card_gib < LARGE_CARD_GIB
    return DEFAULT_BATCHED_TOKENS_SMALL if small else DEFAULT_BATCHED_TOKENS


def _inference_activations(w: Workload, n: int, card_gib: float | None) -> tuple[float, float, float]:
    """(KV cache, prefill activations, logits) bytes per GPU."""
    s = w.shape
    tokens = float(w.seq_len * w.micro_batch)
    kv = 2 * s.layers * s.kv_dim * tokens * w.kv_bytes
    chunk = min(tokens, float(batched_tokens(w, card_gib)))
    # Tensor parallelism splits the column-parallel outputs (K/V, the MLP's gate, up and product) over
    # the n ranks; the hidden-wide buffers (the residual stream, the norm's output, each row-parallel
    # output after its all-reduce) stay whole on every rank, as in training (Megatron without
    # sequence parallelism).
    act = INFER_ACT * 2 * chunk * (2 * s.hidden + (2 * s.kv_dim + 3 * s.intermediate) / n)
    logits = 4.0 * w.micro_batch * s.vocab  # fp32 logits of the last token of each sequence
    return kv / n, act, logits


def nccl_gib(gpus: int, mode: str, training: bool = True) -> float:
    if gpus <= 1 or mode == "none":
        return 0.0
    return NCCL_GIB * (VLLM_TP_COMMUNICATORS if mode == "tp" and not training else 1)


def estimate_memory(
    w: Workload, gpus: int = 1, sharding: str | None = None, card_gib: float | None = None
) -> MemoryEstimate:
    """Per-GPU memory of ``w`` spread over ``gpus`` GPUs with ``sharding`` (default: the most
    sharded option ``w`` allows on that many GPUs, the smallest per-GPU figure). ``card_gib``, the
    card's usable memory when known, picks vLLM's default prefill chunk for inference."""
    mode = sharding or sharding_options(w, gpus)[-1]
    n = max(1, gpus) if mode in ("zero2", "zero3", "fsdp", "tp") else 1
    parts = _model_states(w, n, mode)
    if w.training:
        act, logits = _training_activations(w, mode, n)
        kv = 0.0
    else:
        kv, act, logits = _inference_activations(w, n if mode == "tp" else 1, card_gib)
    parts |= {"activations": act, "logits": logits, "kv_cache": kv}
    out = {k: parts[k] / GIB for k in COMPONENTS if k != "overhead"}
    out["overhead"] = CONTEXT_GIB + WORKSPACE_GIB + nccl_gib(gpus, mode, w.training)
    return MemoryEstimate(gpus, mode, out)


def checkpoint_bytes(w: Workload) -> float:
    """What a resumable checkpoint holds: full fine-tuning saves 16-bit weights plus the master and
    optimizer state; LoRA saves only the adapters and their optimizer state; inference keeps no state."""
    full_state = (2.0 if w.knobs.optimizer == "adamw-8bit" or w.knobs.optimizer == "paged-adamw-8bit"
                  else (1 if w.knobs.optimizer == "sgd" else 2) * STATE_BYTES[w.knobs.optimizer_state_dtype])
    if w.method == "full":
        return (2.0 + (MASTER_BYTES if w.uses_master else 0.0) + full_state) * w.n_params
    if w.training:
        return (ADAPTER_BYTES[w.knobs.adapter_dtype] + full_state) * w.trainable_params
    return 0.0
