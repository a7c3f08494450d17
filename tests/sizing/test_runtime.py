"""Runtime and fit: FLOPs per token, throughput, bandwidth-bound decoding, GPU support."""

from __future__ import annotations

import pytest

from gpuorch import gpus
from gpuorch.errors import UserInputError
from gpuorch.sizing import Workload, decode_tokens_per_s, estimate_hours, smallest_fit, training_flops
from gpuorch.sizing.fabric import Fabric
from gpuorch.sizing.report import check_fit, estimate_report
from gpuorch.sizing.runtime import (
    AC_SPEED,
    BANDWIDTH_EFFICIENCY,
    FINETUNE_STACK_SPEED,
    LORA_SPEED,
    SCALE_FAST,
    SCALE_PCIE,
    STEP_OVERHEAD_S,
    UTILISATION,
    flops_per_token,
    scaling,
)

H100, L4, T4, A100 = (gpus.lookup(n) for n in ("H100", "L4", "T4", "A100"))


@pytest.mark.parametrize("method, k", [("full", 6), ("lora", 4), ("qlora", 4)])
def test_training_flops_per_token_with_the_attention_term(method, k):
    w = Workload(preset="llama-3-8b", method=method, seq_len=4096)
    # k*N for the matmuls with weights, 12*L*h*s for attention (QK^T and AV, forward and backward)
    assert flops_per_token(w) == pytest.approx(k * w.n_params + 12 * 32 * 4096 * 4096)
    assert training_flops(w, 1e6) == pytest.approx(flops_per_token(w) * 1e6)
    # At 64k context attention is more than half the work: runtime grows with the context.
    long = w.model_copy(update={"seq_len": 65536})
    assert k * w.n_params < 12 * 32 * 4096 * 65536 and flops_per_token(long) > 2 * flops_per_token(w)


def test_training_hours_hand_computed_on_one_h100():
    w = Workload(preset="llama-3-8b", method="full", tokens="1B", activation_checkpointing="none")
    # the hf stack (the default) keeps FINETUNE_STACK_SPEED of torchtitan's calibrated utilisation
    rate = 989e12 * UTILISATION["H100"] * FINETUNE_STACK_SPEED / flops_per_token(w)
    # each micro-batch (2,048 tokens by default) also pays the HF Trainer's step overhead
    assert estimate_hours(w, H100) == pytest.approx(1e9 / (2048 / (2048 / rate + STEP_OVERHEAD_S)) / 3600)
    titan = w.model_copy(update={"stack": "torchtitan"})  # its own runs: no stack factor, no step overhead
    assert estimate_hours(titan, H100) == pytest.approx(1e9 / rate / 3600 * FINETUNE_STACK_SPEED)
    lora = Workload(preset="llama-3-8b", method="lora", tokens="1B", activation_checkpointing="none")
    rate_l = 989e12 * UTILISATION["H100"] * FINETUNE_STACK_SPEED * LORA_SPEED / flops_per_token(lora)
    # each micro-batch (2,048 tokens by default) also pays the HF Trainer's step overhead
    step = 2048 / rate_l + STEP_OVERHEAD_S
    assert estimate_hours(lora, H100) == pytest.approx(1e9 / (2048 / step) / 3600)
    # a job's own efficiency is its measured utilisation: no stack, adapter or step cost on top
    q = Workload(preset="llama-3-8b", method="qlora", tokens="1B", efficiency=0.5)  # full checkpointing by default
    rate_q = 989e12 * 0.5 * AC_SPEED["full"] / flops_per_token(q)
    assert estimate_hours(q, H100) == pytest.approx(1e9 / rate_q / 3600)


def test_qlora_pays_dequantisation_per_micro_batch_so_longer_ones_catch_up_with_lora():
    from gpuorch.sizing.runtime import DEQUANT_S_PER_PARAM_DEFAULT, step_seconds, training_tokens_per_s

    def ratio(seq: int) -> float:
        lora, qlora = (Workload(preset="llama-3-8b", method=m, seq_len=seq) for m in ("lora", "qlora"))
        assert step_seconds(qlora) == pytest.approx(STEP_OVERHEAD_S + qlora.n_params * DEQUANT_S_PER_PARAM_DEFAULT)
        return training_tokens_per_s(qlora, H100) / training_tokens_per_s(lora, H100)

    assert ratio(512) < ratio(2048) < ratio(8192) < 1.0
    tune = Workload(preset="llama-3-8b", method="qlora", stack="torchtune")
    assert step_seconds(tune) < step_seconds(Workload(preset="llama-3-8b", method="qlora"))  # compiled torchao NF4


def test_utilisation_is_per_gpu_class():
    w = Workload(preset="llama-3-8b", method="full", tokens="1B")
    # Published A100 utilisation is well above H100's: an A100 is more than 1/3 of an H100 here.
    assert UTILISATION["A100"] > 1.2 * UTILISATION["H100"]
    assert estimate_hours(w, A100) < 3 * estimate_hours(w, H100)


def test_multi_gpu_scaling_penalises_pcie():
    assert scaling(1, None, "none") == 1
    assert scaling(8, "nvlink", "zero3") == SCALE_FAST > scaling(8, "pcie", "none") == SCALE_PCIE
    assert scaling(8, "pcie", "zero3") < SCALE_PCIE
    w = Workload(params="8B", method="full", tokens="1B", stack="torchtitan")  # no per-step overhead: scaling alone
    nvlink, pcie = estimate_hours(w, A100, 8, "nvlink", "zero3"), estimate_hours(w, A100, 8, "pcie", "zero3")
    assert nvlink < pcie and nvlink == pytest.approx(estimate_hours(w, A100) / 8 / SCALE_FAST)
    # Across nodes the fabric decides (tests/sizing/test_multinode_scaling.py has the formula).
    ib, eth = Fabric("infiniband", 3200), Fabric("ethernet", 100)
    one_node = estimate_hours(w, A100, 8, "nvlink", "fsdp")
    on_ib = estimate_hours(w, A100, 16, "nvlink", "fsdp", 2, ib)
    on_eth = estimate_hours(w, A100, 16, "nvlink", "fsdp", 2, eth)
    assert one_node / 2 < on_ib < 1.1 * one_node / 2 < on_eth


def test_decoding_is_bandwidth_bound():
    w = Workload(preset="llama-2-7b", method="inference", seq_len=2048, micro_batch=1, tokens="1M")
    weights = 2 * w.n_params
    kv_half = 2 * 32 * 4096 * 2048 * 2 / 2
    expected = 1 / ((weights + kv_half) / (H100.bandwidth_gbs * 1e9 * BANDWIDTH_EFFICIENCY))
    assert decode_tokens_per_s(w, H100) == pytest.approx(expected)
    assert decode_tokens_per_s(w, H100) / decode_tokens_per_s(w, L4) == pytest.approx(3350 / 300)
    assert estimate_hours(w, H100) == pytest.approx(1e6 / expected / 3600)


def test_duration_overrides_and_missing_tokens():
    assert estimate_hours(Workload(params="8B", duration="90m"), L4) == 1.5
    assert estimate_hours(Workload(params="8B"), L4) is None


def test_precision_support():
    w = Workload(params="1B", method="lora", precision="bf16")
    assert smallest_fit(w, T4) is None  # Turing has no bf16
    assert smallest_fit(w.model_copy(update={"precision": "fp16"}), T4) is not None
    with pytest.raises(UserInputError, match="no fp8"):
        check_fit(Workload(params="1B", method="inference", precision="fp8"), "A100")


def test_check_fit_names_the_gap_and_a_fix():
    w = Workload(params="70B", method="qlora")
    gap = r"1xA10G is too small: needs .* GiB missing; a fit keeps 5% of the card free\); 4xA10G fits"
    with pytest.raises(UserInputError, match=gap):
        check_fit(w, "A10G")
    with pytest.raises(UserInputError, match="unknown GPU"):
        check_fit(w, "Z900")


def test_report_shape():
    r = estimate_report(Workload(params="8B", method="qlora", tokens="10M"), 1, "L4")
    assert set(r) >= {"per_gpu_gib", "total_gib", "breakdown", "fits", "smallest", "workload"}
    assert r["smallest"]["single"]["gpu_count"] == 1 and r["smallest"]["multi_node"] is None
    assert all("est_hours" in f for f in r["fits"])
