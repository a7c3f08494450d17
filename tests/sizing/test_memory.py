"""The memory estimator against hand-computed cases and the buying guides' rules of thumb."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuorch import gpus
from gpuorch.sizing import GIB, PRESETS, Workload, estimate_memory, parse_count, smallest_fits, weight_bytes
from gpuorch.sizing.memory import HEADROOM, NF4_BYTES, OVERHEAD_GIB, checkpoint_bytes


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
    # 32 layers x 34 bytes x s=2048 x h=4096 (FlashAttention, no s^2 term) + fp32 logits 4 x s x V
    w = Workload(preset="llama-2-7b", method="full", seq_len=2048, micro_batch=1)
    expected = 32 * 34 * 2048 * 4096 + 4 * 2048 * 32000
    assert estimate_memory(w).breakdown["activations"] * GIB == pytest.approx(expected)
    ckpt = w.model_copy(update={"gradient_checkpointing": True})
    expected_ckpt = (2 * 32 + 34) * 2048 * 4096 + 4 * 2048 * 32000
    assert estimate_memory(ckpt).breakdown["activations"] * GIB == pytest.approx(expected_ckpt)


def test_lora_trainable_params_match_peft_for_llama2_7b_r8_q_v():
    # PEFT prints "trainable params: 4,194,304" for Llama-2-7B, r=8, target q_proj, v_proj.
    w = Workload(preset="llama-2-7b", method="lora", lora_rank=8, lora_targets=["q_proj", "v_proj"])
    assert w.trainable_params == 4_194_304
    # fp32 adapters: 4 bytes weights, 4 bytes grads, 8 bytes Adam state per trainable param
    b = estimate_memory(w).breakdown
    assert b["adapters"] * GIB == pytest.approx(4 * 4_194_304)
    assert b["optimizer"] * GIB == pytest.approx(8 * 4_194_304)
    assert b["weights"] * GIB == pytest.approx(2 * PRESETS["llama-2-7b"].param_count())


def test_qlora_weights_are_nf4_with_16bit_embeddings():
    w = Workload(preset="llama-3-70b", method="qlora")
    n, e = PRESETS["llama-3-70b"].param_count(), PRESETS["llama-3-70b"].embedding_params
    assert weight_bytes(w) == pytest.approx((n - e) * NF4_BYTES + 2 * e)
    assert pytest.approx(0.5159, abs=1e-4) == NF4_BYTES  # 4 bits + 0.127 bits of constants


def test_qlora_fits_a_70b_model_on_one_80gb_card_and_a_48gb_card_at_short_context():
    w = Workload(params="70B", method="qlora")
    assert fits_on(w, "H100") and fits_on(w, "A100-80GB")
    assert not fits_on(w, "A10G")
    single = [f for f in smallest_fits(w) if f.scope == "single"]
    assert min(f.usable_gib for f in single) >= 48 and "A100-80GB" in {f.gpu for f in single}
    short = w.model_copy(update={"seq_len": 512, "lora_targets": ("q", "k", "v", "o")})
    assert fits_on(short, "L40S") and fits_on(short, "RTXA6000")
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
    assert singles == {"B200", "B300", "MI300X", "MI325X"}  # one card only with more than 141 GB


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


def test_sharding_divides_what_each_stage_shards():
    w = Workload(params="7B", method="full")
    one, z2, z3 = estimate_memory(w, 1), estimate_memory(w, 8, "zero2"), estimate_memory(w, 8, "zero3")
    assert z2.breakdown["weights"] == one.breakdown["weights"]
    assert z2.breakdown["gradients"] == pytest.approx(one.breakdown["gradients"] / 8)
    assert z2.breakdown["optimizer"] == pytest.approx(one.breakdown["optimizer"] / 8)
    # ZeRO-3 also shards the weights, plus two gathered layers in flight
    layer = PRESETS["mistral-7b"].layer_params * 2 / GIB
    assert z3.breakdown["weights"] == pytest.approx(one.breakdown["weights"] / 8 + 2 * layer)
    assert z3.breakdown["activations"] == one.breakdown["activations"]  # data parallel: not sharded
    assert z3.total_gib == pytest.approx(z3.per_gpu_gib * 8)


def test_overhead_and_headroom():
    b = estimate_memory(Workload(params="1B", method="inference")).breakdown
    assert b["overhead"] == OVERHEAD_GIB
    rest = sum(v for k, v in b.items() if k != "headroom")
    assert b["headroom"] == pytest.approx(HEADROOM * rest)


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
