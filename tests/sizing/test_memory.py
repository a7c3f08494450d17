"""The memory estimator against hand-computed cases and the buying guides' rules of thumb."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuorch import gpus
from gpuorch.sizing import GIB, PRESETS, Workload, estimate_memory, parse_count, smallest_fits, weight_bytes
from gpuorch.sizing.memory import (
    ACT_CKPT_BYTES,
    ACT_SCALE,
    CONTEXT_GIB,
    HEADROOM,
    LOSS_BYTES,
    NCCL_GIB,
    NF4_BYTES,
    VLLM_TP_COMMUNICATORS,
    WORKSPACE_GIB,
    allowed_gib,
    checkpoint_bytes,
    fits,
)


def fits_on(w: Workload, gpu: str, count: int = 1) -> bool:
    from gpuorch.sizing import best_estimate

    return best_estimate(w, count, gpus.lookup(gpu).usable)[1]


def test_full_finetune_with_adam_is_16_bytes_per_param_before_activations():
    w = Workload(params="7B", method="full")
    b = estimate_memory(w).breakdown
    # bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m, v 8 = 16 bytes/param
    assert (b["weights"] + b["gradients"] + b["optimizer"]) * GIB == pytest.approx(16 * 7e9)
    # The guides: optimizer state alone roughly triples the (fp32) weights' memory.
    assert b["optimizer"] * GIB == pytest.approx(3 * 4 * 7e9)


@pytest.mark.parametrize("optimizer, opt_bytes", [("adamw", 12), ("adamw-8bit", 6), ("sgd", 8)])
def test_optimizer_state_per_param(optimizer, opt_bytes):
    w = Workload(params="1B", method="full", optimizer=optimizer)
    assert estimate_memory(w).breakdown["optimizer"] * GIB == pytest.approx(opt_bytes * 1e9)


def test_activation_memory_hand_computed_llama2_7b():
    # per layer per token: 12h + 4kv + 8i bytes (bf16, FlashAttention) x ACT_SCALE; eager loss: LOSS_BYTES x s x V
    w = Workload(preset="llama-2-7b", method="full", seq_len=2048, micro_batch=1)
    layer = ACT_SCALE * 2048 * (12 * 4096 + 4 * 4096 + 8 * 11008)
    b = estimate_memory(w).breakdown
    assert b["activations"] * GIB == pytest.approx(32 * layer)
    assert b["logits"] * GIB == pytest.approx(LOSS_BYTES["eager"] * 2048 * 32000)
    ckpt = w.model_copy(update={"gradient_checkpointing": True})
    assert estimate_memory(ckpt).breakdown["activations"] * GIB == pytest.approx(
        ACT_CKPT_BYTES * 2048 * 4096 * 32 + layer)  # the layer inputs, plus one layer recomputed


def test_lora_trainable_params_match_peft_for_llama2_7b_r8_q_v():
    # PEFT prints "trainable params: 4,194,304" for Llama-2-7B, r=8, target q_proj, v_proj.
    w = Workload(preset="llama-2-7b", method="lora", lora_rank=8, lora_targets=["q_proj", "v_proj"])
    assert w.trainable_params == 4_194_304
    # fp32 adapters: 4 bytes weights, 4 bytes grads, 8 bytes Adam state per trainable param
    b = estimate_memory(w).breakdown
    assert b["adapters"] * GIB == pytest.approx(4 * 4_194_304)
    assert b["optimizer"] * GIB == pytest.approx(8 * 4_194_304)
    assert b["weights"] * GIB == pytest.approx(2 * PRESETS["llama-2-7b"].param_count())


def test_qlora_weights_are_nf4_with_unquantised_embeddings():
    w = Workload(preset="llama-3-70b", method="qlora")
    n, e = PRESETS["llama-3-70b"].param_count(), PRESETS["llama-3-70b"].embedding_params
    # PEFT's prepare_model_for_kbit_training (fp32 adapters, the default) casts them to fp32 ...
    assert weight_bytes(w) == pytest.approx((n - e) * NF4_BYTES + 4 * e)
    # ... torchtune and Unsloth (16-bit adapters) keep them 16-bit.
    assert weight_bytes(w.model_copy(update={"adapter_dtype": "bf16"})) == pytest.approx((n - e) * NF4_BYTES + 2 * e)
    assert pytest.approx(0.5159, abs=1e-4) == NF4_BYTES  # 4 bits + 0.127 bits of constants


def test_qlora_fits_a_70b_model_on_one_80gb_card_and_a_48gb_card_at_short_context():
    w = Workload(params="70B", method="qlora")
    assert fits_on(w, "H100") and fits_on(w, "A100-80GB")
    assert not fits_on(w, "A10G")
    single = [f for f in smallest_fits(w) if f.scope == "single"]
    assert min(f.usable_gib for f in single) >= 48 and "A100-80GB" in {f.gpu for f in single}
    # On a 48 GB card only with the 16-bit-embedding stacks (torchtune, Unsloth): PEFT's fp32 upcast
    # of the embeddings does not fit there (Hugging Face + FA2 runs out of memory on 48 GB, per Unsloth).
    short = Workload(params="70B", method="qlora", seq_len=512, lora_targets="attention", adapter_dtype="bf16")
    assert fits_on(short, "L40S") and fits_on(short, "RTXA6000")
    assert not fits_on(short.model_copy(update={"adapter_dtype": "fp32"}), "L40S")
    # Full fine-tuning of the same model needs a multi-GPU node even on 80 GB cards.
    assert not fits_on(Workload(params="70B", method="full"), "H100")


@pytest.mark.parametrize("params, precision", [("7B", "int4"), ("13B", "int4"), ("7B", "int8"), ("13B", "int8")])
def test_quantized_7b_13b_inference_fits_a_24gb_card(params, precision):
    w = Workload(params=params, method="inference", precision=precision, seq_len=4096)
    assert fits_on(w, "A10G") and fits_on(w, "L4")


def test_70b_16bit_inference_needs_80gb_class_cards_or_several_gpus():
    w = Workload(params="70B", method="inference", precision="bf16")
    assert not fits_on(w, "H100") and not fits_on(w, "L40S", 2)
    assert fits_on(w, "H100", 2) and fits_on(w, "A100-80GB", 2)
    one_gpu = estimate_memory(w).breakdown["weights"]
    assert estimate_memory(w, 2, "tp").breakdown["weights"] == pytest.approx(one_gpu / 2)
    singles = {f.gpu for f in smallest_fits(w) if f.scope == "single"}
    assert {"B200", "MI300X"} <= singles  # one card only from 141 GB up
    assert all(gpus.lookup(g).usable >= 140 for g in singles)


def test_kv_cache_hand_computed_and_linear_in_context_times_batch():
    # Llama-2-13B: 2 (K, V) x 40 layers x 40 heads x 128 dims x 2 bytes = 819,200 bytes per token
    w = Workload(preset="llama-2-13b", method="inference", seq_len=4096, micro_batch=1)
    assert estimate_memory(w).breakdown["kv_cache"] * GIB == pytest.approx(819_200 * 4096)
    base = estimate_memory(w).breakdown["kv_cache"]
    for seq, batch, factor in [(8192, 1, 2), (4096, 4, 4), (2048, 2, 1), (1024, 8, 2)]:
        other = w.model_copy(update={"seq_len": seq, "micro_batch": batch})
        assert estimate_memory(other).breakdown["kv_cache"] == pytest.approx(base * factor)
    fp8 = w.model_copy(update={"precision": "fp8"})
    assert estimate_memory(fp8).breakdown["kv_cache"] == pytest.approx(base / 2)


def test_zero_stages_match_deepspeeds_estimators():
    """DeepSpeed's estimate_zero2_model_states_mem_needs (no offload): 4N + 16N/n;
    estimate_zero3_model_states_mem_needs: 4 x largest layer + 18N/n; with cpu_offload 2N (ZeRO-2)."""
    w = Workload(preset="llama-3-8b", method="full")
    n = w.n_params
    states = ("weights", "gradients", "optimizer", "adapters")
    z2 = estimate_memory(w, 8, "zero2").breakdown
    assert sum(z2[k] for k in states) * GIB == pytest.approx(4 * n + 16 * n / 8)
    assert sum(z2[k] for k in states) == pytest.approx(44.9, abs=0.05)  # DeepSpeed's figure for 8B on 8 GPUs
    z3 = estimate_memory(w, 8, "zero3").breakdown
    largest = 128256 * 4096  # the embedding (and the LM head) is the largest layer
    assert sum(z3[k] for k in states) * GIB == pytest.approx(4 * largest + 18 * n / 8)
    off = estimate_memory(Workload(preset="llama-3-8b", method="full", offload="optimizer"), 8, "zero2").breakdown
    assert sum(off[k] for k in states) * GIB == pytest.approx(2 * n)
    # Activations are per micro-batch: data parallelism does not divide them.
    assert z3["activations"] == estimate_memory(w).breakdown["activations"]


def test_fsdp_shards_fp32_master_states_and_a_frozen_base_in_its_own_dtype():
    w = Workload(preset="llama-3-8b", method="full")
    f = estimate_memory(w, 8, "fsdp").breakdown
    shape = PRESETS["llama-3-8b"]
    gathered = 2 * 2 * shape.vocab * shape.hidden  # two unsharded bf16 modules in flight
    assert f["weights"] * GIB == pytest.approx(4 * w.n_params / 8 + gathered)  # FSDP2: the fp32 master is the param
    assert f["optimizer"] * GIB == pytest.approx(8 * w.n_params / 8)
    lora = Workload(preset="llama-3-70b", method="lora")
    one, eight = estimate_memory(lora).breakdown, estimate_memory(lora, 8, "fsdp").breakdown
    per_layer = one["weights"] / 80
    assert eight["weights"] == pytest.approx(one["weights"] / 8 + 2 * per_layer)


def test_overhead_and_headroom():
    one = estimate_memory(Workload(params="1B", method="inference")).breakdown
    assert one["overhead"] == CONTEXT_GIB + WORKSPACE_GIB
    # vLLM's TP workers hold three NCCL communicators (world group; TP group's PyNccl and process
    # group); a training group one.
    assert estimate_memory(Workload(params="1B", method="inference"), 2, "tp").breakdown["overhead"] == (
        CONTEXT_GIB + WORKSPACE_GIB + VLLM_TP_COMMUNICATORS * NCCL_GIB)
    assert estimate_memory(Workload(params="1B", method="full"), 2, "zero3").breakdown["overhead"] == (
        CONTEXT_GIB + WORKSPACE_GIB + NCCL_GIB)
    # A fit leaves HEADROOM of the usable memory free: an estimate inside it is refused.
    est = estimate_memory(Workload(params="7B", method="lora"))
    assert fits(est, est.per_gpu_gib / (1 - HEADROOM) + 0.01)
    assert not fits(est, est.per_gpu_gib)
    assert not fits(est, est.per_gpu_gib / (1 - HEADROOM / 2))
    assert allowed_gib(80.0) == pytest.approx(80.0 * (1 - HEADROOM))


def test_checkpoint_size():
    assert checkpoint_bytes(Workload(params="1B", method="full")) == pytest.approx(14e9)
    lora = Workload(preset="llama-2-7b", method="lora", lora_rank=8, lora_targets="q,v")
    assert checkpoint_bytes(lora) == pytest.approx(12 * 4_194_304)
    assert checkpoint_bytes(Workload(params="1B", method="inference")) == 0


@pytest.mark.parametrize(
    "text, value", [("7B", 7e9), ("70e9", 70e9), ("350M", 350e6), ("1.5T", 1.5e12), (8_000, 8e3), ("8b", 8e9)]
)
def test_parse_count(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["7x", "", "-7B", "B7", "nan", True])
def test_parse_count_rejects(text):
    with pytest.raises(ValueError):
        parse_count(text)


def test_shapes_presets_and_generic():
    assert PRESETS["llama-3-8b"].param_count() == pytest.approx(8.03e9, rel=1e-3)
    assert Workload(params="8B").shape.name == "llama-3-8b"
    generic = Workload(params="1B").shape
    assert generic.name == "generic" and generic.param_count() == pytest.approx(1e9, rel=0.15)
    custom = Workload(architecture={"layers": 2, "hidden": 256, "heads": 4})
    assert custom.shape.kv_heads == 4 and custom.n_params == custom.shape.param_count()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({}, "give params"),
        ({"params": "8B", "method": "full", "precision": "int4"}, "full fine-tuning"),
        ({"params": "8B", "method": "qlora", "precision": "int8"}, "compute dtype"),
        ({"params": "8B", "method": "lora", "lora_targets": "qkv"}, "unknown LoRA target"),
        ({"params": "8B", "preset": "gpt-9"}, "unknown preset"),
        ({"params": "8B", "colour": "blue"}, "Extra inputs"),
        ({"architecture": {"layers": 2, "hidden": 100, "heads": 3}}, "multiple of heads"),
    ],
)
def test_workload_rejects_impossible_combinations(fields, message):
    with pytest.raises(ValidationError, match=message):
        Workload(**fields)


def _b(**kw):
    return estimate_memory(Workload(preset="llama-3-8b", **kw)).breakdown


def test_master_weights_optimizer_state_dtype_and_paged_optimizers():
    n = PRESETS["llama-3-8b"].param_count()
    mixed, pure = _b(method="full"), _b(method="full", master_weights=False, optimizer_state_dtype="bf16")
    assert mixed["optimizer"] * GIB == pytest.approx(12 * n)  # fp32 master + fp32 m, v
    assert pure["optimizer"] * GIB == pytest.approx(4 * n)  # torchtune's pure bf16: bf16 m, v, no master
    assert _b(method="full", optimizer="paged-adamw-8bit")["optimizer"] * GIB == pytest.approx(4 * n)  # master only
    assert _b(method="full", optimizer="adamw-8bit")["optimizer"] * GIB == pytest.approx(6 * n)
    layer = PRESETS["llama-3-8b"].layer_params
    assert _b(method="full", optimizer_in_backward=True)["gradients"] * GIB == pytest.approx(2 * layer)


def test_adapter_dtype():
    fp32, bf16 = _b(method="lora"), _b(method="lora", adapter_dtype="bf16")
    assert bf16["adapters"] == pytest.approx(fp32["adapters"] / 2) and bf16["gradients"] == pytest.approx(
        fp32["gradients"] / 2)


def test_checkpointing_offload_loss_and_compile_order_the_activations():
    act = {m: _b(method="full", seq_len=8192, activation_checkpointing=m)["activations"]
           for m in ("none", "selective", "full")}
    assert act["none"] > act["selective"] > act["full"] > 0
    offloaded = _b(method="full", seq_len=8192, activation_checkpointing="full", offload="activations")
    assert offloaded["activations"] < act["full"]
    loss = {m: _b(method="lora", seq_len=8192, loss=m)["logits"] for m in ("eager", "chunked", "fused")}
    assert loss["eager"] > loss["chunked"] > loss["fused"] == 0
    assert loss["eager"] * GIB == pytest.approx(LOSS_BYTES["eager"] * 8192 * 128256)
    compiled = _b(method="full", seq_len=8192, compile=True)
    assert compiled["activations"] < act["none"] and compiled["logits"] < _b(method="full", seq_len=8192)["logits"]


def test_kv_cache_dtype_and_chunked_prefill():
    def b(**kw):
        return estimate_memory(Workload(preset="llama-3.1-8b", method="inference", seq_len=32768, micro_batch=4,
                                        **kw)).breakdown

    base = b()
    assert b(kv_cache_dtype="fp8")["kv_cache"] == pytest.approx(base["kv_cache"] / 2)
    # Prefill runs in chunks of max_batched_tokens (vLLM's chunked prefill), not all 131k tokens at once.
    small = b(max_batched_tokens=2048)
    assert small["activations"] == pytest.approx(base["activations"] / 4)


def test_architecture_intermediate_and_tied_embeddings():
    w = Workload(architecture={"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 128256,
                               "intermediate": 14336})
    assert w.shape.param_count() == PRESETS["llama-3-8b"].param_count()
    tied = Workload(architecture={"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 128256,
                                  "intermediate": 14336, "tied_embeddings": True})
    assert w.n_params - tied.n_params == 128256 * 4096


@pytest.mark.parametrize("fields, message", [
    ({"method": "inference", "offload": "optimizer"}, "offload moves training state to host memory"),
    ({"method": "inference", "loss": "fused"}, "loss: inference computes no loss"),
    ({"method": "inference", "activation_checkpointing": "full"}, "activation_checkpointing: inference keeps"),
    ({"method": "lora", "master_weights": False}, "master_weights: only full fine-tuning keeps a master copy"),
    ({"method": "full", "max_batched_tokens": 4096}, "max_batched_tokens is the inference prefill chunk"),
    ({"preset": "llama-3-8b", "seq_len": 16384}, "seq_len 16384 is longer than llama-3-8b's maximum context 8192"),
    ({"offload": "disk"}, "unknown offload 'disk'"),
    ({"gradient_checkpointing": False, "activation_checkpointing": "full"}, "disagree"),
])
def test_contradictory_settings_are_refused_naming_the_field(fields, message):
    with pytest.raises(ValidationError, match=message):
        Workload.model_validate({"params": "8B", **fields})


def test_the_prefill_chunk_follows_vllms_default_for_the_card():
    """vllm serve prefills 8192 tokens at a time on >= 70 GiB cards, 2048 on smaller ones."""
    w = Workload(preset="llama-3.1-8b", method="inference", seq_len=37700)
    small, large = estimate_memory(w, card_gib=22.5), estimate_memory(w, card_gib=79.6)
    assert large.breakdown["activations"] == pytest.approx(4 * small.breakdown["activations"], rel=1e-3)
    assert estimate_memory(w).breakdown == large.breakdown  # no card: the larger chunk
    assert fits_on(w, "A10")  # weights 14.96 GiB + 4.6 GiB of KV cache + 2048-token prefill buffers


def test_tensor_parallel_inference_splits_only_the_column_parallel_prefill_buffers():
    """The hidden-wide buffers (residual, norm output, row-parallel outputs after the all-reduce) stay
    whole on every TP rank; K/V and the MLP's gate, up and product split (issue 36)."""
    w = Workload(preset="llama-3-8b", method="inference", seq_len=8192, max_batched_tokens=8192)
    one, two = estimate_memory(w, 1, "none").breakdown, estimate_memory(w, 2, "tp").breakdown
    s = w.shape
    whole, split = 2 * s.hidden, 2 * s.kv_dim + 3 * s.intermediate
    assert two["activations"] / one["activations"] == pytest.approx((whole + split / 2) / (whole + split))
    assert one["activations"] / 2 < two["activations"] < one["activations"]
    assert two["weights"] == pytest.approx(one["weights"] / 2) and two["kv_cache"] == pytest.approx(one["kv_cache"] / 2)
