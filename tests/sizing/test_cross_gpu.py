"""GPU families calibrated through another family on the same training stack
(tests/data/runtime-cross-gpu.yaml, docs/sizing.md "GPUs outside A100, H100, H200")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuorch import gpus
from gpuorch.sizing.runtime import UTILISATION

PAIRS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "runtime-cross-gpu.yaml").read_text())


def _predicted_ratio(pair: dict) -> float:
    gpu, ref = gpus.lookup(pair["gpu"]), gpus.lookup(pair["ref"])
    assert gpu is not None and ref is not None
    mine = UTILISATION[gpus.family(gpu.name)] * gpu.bf16_tflops
    return mine / (UTILISATION[gpus.family(ref.name)] * ref.bf16_tflops)


def test_pairs_have_sources_and_one_calibration_point():
    assert all(p["source"].startswith("https://") and p["published"] for p in PAIRS)
    assert [p["role"] for p in PAIRS].count("calibration") == 1 and any(p["role"] == "holdout" for p in PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p["id"])
def test_ratio_between_gpus_within_ten_percent(pair):
    measured = pair["tflops"] / pair["ref_tflops"]
    assert _predicted_ratio(pair) == pytest.approx(measured, rel=0.10)


def test_the_calibration_solves_the_utilisation():
    (cal,) = [p for p in PAIRS if p["role"] == "calibration"]
    gpu, ref = gpus.lookup(cal["gpu"]), gpus.lookup(cal["ref"])
    solved = UTILISATION["H100"] * cal["tflops"] / cal["ref_tflops"] * ref.bf16_tflops / gpu.bf16_tflops
    assert UTILISATION["B200"] == pytest.approx(solved, abs=0.005)
