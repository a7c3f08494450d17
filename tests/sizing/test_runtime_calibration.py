"""The runtime estimator against published training throughput (tests/data/runtime-calibration.yaml)."""

from __future__ import annotations

import pytest

from tests.sizing import runtime_calibration as rc

RUNS = rc.load()


def test_at_least_eight_published_points_with_sources():
    assert len(RUNS) >= 8 and all(r.source.startswith("https://") and r.published for r in RUNS)
    assert {r.gpu.name for r in RUNS} >= {"A100-80GB", "H100"}


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_throughput_within_20_percent(run):
    assert abs(run.error()) <= 0.20, f"{run.id}: estimate {run.estimate():,.0f} vs {run.tps_per_gpu:,.0f} tok/s/GPU"


def test_long_context_is_slower_per_token_because_of_attention():
    long = next(r for r in RUNS if r.workload.seq_len == 32768)
    short = next(r for r in RUNS if r.id == "titan-llama31-8b-h100-8-compile-fp8")
    assert long.estimate() < short.estimate() and long.tps_per_gpu < short.tps_per_gpu
