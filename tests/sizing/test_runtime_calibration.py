"""The runtime estimator against published training throughput (tests/data/runtime-calibration.yaml)."""

from __future__ import annotations

import pytest

from tests.sizing import runtime_calibration as rc

RUNS = rc.load()


def test_at_least_eight_published_points_with_sources():
    assert len(RUNS) >= 8 and all(r.source.startswith("https://") and r.published for r in RUNS)
    assert {r.gpu.name for r in RUNS} >= {"A100-80GB", "H100"}


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_throughput_within_20_percent_fitted_and_30_held_out(run):
    # held out: the worst are Qwen's shortest micro-batches (+26%, 72B Q-LoRA at 256 tokens) and its
    # 1,024-token 7B Q-LoRA (-24%); docs/sizing.md "Runtime"
    limit = 0.20 if run.role == "calibration" else 0.30
    assert abs(run.error()) <= limit, f"{run.id}: estimate {run.estimate():,.0f} vs {run.tps_per_gpu:,.0f} tok/s/GPU"


def test_single_gpu_fine_tuning_runs_of_two_stacks_are_fitted_and_held_out():
    one = [r for r in RUNS if r.gpus == 1]
    for stack in ("torchtune", "hf"):  # two stacks, two sources, each with a part held out
        runs = [r for r in one if r.workload.stack == stack]
        assert {r.role for r in runs} == {"calibration", "holdout"}, stack
        assert {r.workload.method for r in runs} >= {"lora", "qlora"}, stack
        assert rc.median_abs_error([r for r in runs if r.role == "holdout"]) <= 0.10, stack


def test_lora_speed_up_over_full_fine_tuning_matches_the_lora_paper_held_out():
    """Hu et al. 2021 (LoRA, section 4.2): "a 25% speedup during training on GPT-3 175B compared to
    full fine-tuning". GPT-3's shape (96 layers, hidden 12,288, 2,048 context) as a Llama-layout MLP
    of the same parameter count; no checkpointing assumed. Held out: LORA_SPEED came from torchtune."""
    from gpuorch import gpus
    from gpuorch.sizing import Workload
    from gpuorch.sizing.runtime import training_tokens_per_s

    arch = {"layers": 96, "hidden": 12288, "heads": 96, "kv_heads": 96, "vocab": 50257, "intermediate": 32768}
    base = {"architecture": arch, "seq_len": 2048, "activation_checkpointing": "none"}
    a100 = gpus.lookup("A100-80GB")
    assert a100 is not None
    full, lora = (training_tokens_per_s(Workload.model_validate({**base, "method": m}), a100) for m in ("full", "lora"))
    assert lora / full == pytest.approx(1.25, rel=0.05)


def test_long_context_is_slower_per_token_because_of_attention():
    long = next(r for r in RUNS if r.workload.seq_len == 32768)
    short = next(r for r in RUNS if r.id == "titan-llama31-8b-h100-8-compile-fp8")
    assert long.estimate() < short.estimate() and long.tps_per_gpu < short.tps_per_gpu


def test_a_part_is_held_out_and_both_sets_stay_within_ten_percent_median():
    cal = [r for r in RUNS if r.role == "calibration"]
    hold = [r for r in RUNS if r.role == "holdout"]
    assert len(hold) >= 3 and {r.gpu.model for r in hold} >= {"A100", "H100"}
    assert rc.summary(RUNS)["runtime_holdout_runs"] == len(hold)
    assert rc.median_abs_error(cal) <= 0.10 and rc.median_abs_error(hold) <= 0.10


def test_a_power_capped_h100_runs_between_nvl_and_sxm_and_a_700w_sxm_offer_gets_its_own_peak():
    from gpuorch import gpus
    from gpuorch.sizing.runtime import POWER_CURVE, capped_tflops

    sxm, nvl, pcie = (gpus.lookup(n) for n in ("H100", "H100-NVL", "H100-PCIE"))
    assert sxm and nvl and pcie
    # the curve is the datasheets' own peaks at each part's rated power
    assert {t for _, t in POWER_CURVE["H100"]} == {sxm.bf16_tflops, nvl.bf16_tflops, pcie.bf16_tflops}
    capped = capped_tflops(sxm, 500)
    assert nvl.bf16_tflops < capped < sxm.bf16_tflops and capped_tflops(sxm, 700) == sxm.bf16_tflops
    for w in range(300, 800, 50):  # monotone in power, never above the part's datasheet peak
        assert capped_tflops(sxm, w) <= capped_tflops(sxm, w + 50) <= sxm.bf16_tflops
    h100_runs = [r for r in RUNS if r.gpu.model == "H100"]
    assert h100_runs and all(r.gpu.bf16_tflops == pytest.approx(capped) for r in h100_runs)


def test_estimate_says_which_speeds_are_uncalibrated():
    import json

    from typer.testing import CliRunner

    import gpuorch.cli.planning  # noqa: F401 - registers the commands
    from gpuorch.cli.app import app
    from gpuorch.sizing.runtime import UTILISATION

    out = CliRunner().invoke(app, ["estimate", "--preset", "llama-3.1-8b", "--method", "qlora", "--tokens", "1B",
                                   "--json"])
    fits = json.loads(out.stdout)["fits"]
    assert fits and all(f["speed_calibrated"] == (f["gpu"].split("-")[0] in UTILISATION) for f in fits)
    assert any(not f["speed_calibrated"] for f in fits)
    text = CliRunner().invoke(app, ["estimate", "--preset", "llama-3.1-8b", "--method", "qlora", "--tokens", "1B"])
    assert "uncalibrated" in text.stdout


def test_gddr_runs_are_fitted_and_held_out_over_three_stacks_and_only_uncalibrated_cards_say_so():
    """Issue 36: the RTX 4090's utilisation is solved on part of its published runs, the rest held
    out (LLaMA-Factory, torchtune, Answer.AI's HF-style loop); every GDDR card without a figure of its
    own keeps the class default and is marked uncalibrated."""
    from gpuorch import gpus
    from gpuorch.sizing import Workload
    from gpuorch.sizing.runtime import UTILISATION, calibrated

    runs = rc.gddr(RUNS)
    assert {r.role for r in runs} == {"calibration", "holdout"} and {r.gpu.name for r in runs} == {"RTX4090"}
    assert all(r.source.startswith("https://") and r.date and r.published for r in runs)
    held = [r for r in runs if r.role == "holdout"]
    assert {r.workload.stack for r in held} == {"llama-factory", "torchtune", "hf"}
    assert rc.median_abs_error(held) <= 0.15 and rc.median_abs_error([r for r in runs if r not in held]) <= 0.05
    w = Workload(preset="llama-3.1-8b", method="qlora")
    for g in gpus.GPUS:
        if g.memory_type.startswith("GDDR"):
            assert calibrated(w, g) == (g.model in UTILISATION), g.name
    assert calibrated(w, gpus.lookup("RTX4090")) and not calibrated(w, gpus.lookup("L40S"))
