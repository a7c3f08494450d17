"""bench/sweep.py's small-cap night measures warm reuse (issue 35): its instances' runner recycles
an instance for another attempt, as the local, sim and SSH runners do, so a trial's instance is
kept warm and the next trial runs on it through the daemon's own pool; with ``keep_warm: 0s``
every trial boots. Before, no instance was ever kept warm in the bench.

The bench's own serial night (its market, its trials), until the cap's money is spent."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_sweep", REPO / "bench" / "sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_sweep"] = module
    spec.loader.exec_module(module)
    return module


def night(bench, tmp_path: Path, keep_warm: str | None) -> dict:
    """The small-cap night's serial baseline (one trial at a time, until the cap's money is spent):
    every trial after the first can take the instance its predecessor left warm."""
    work = tmp_path / (keep_warm or "default")
    work.mkdir()
    cap = round(bench.SMALL_TRIALS * (bench.SMALL_STEPS * bench.STEP_S + bench.BOOT_S) * 0.9731 / 3600, 2)
    return bench.run(0, 3.0, 1, None, None, work, stop_at_spend=cap, steps=bench.SMALL_STEPS,
                     every=bench.SMALL_EVERY, keep_warm=keep_warm, trace=True)


def test_the_bench_runs_trials_on_warm_instances_through_the_daemons_pool(bench, tmp_path):
    warm = night(bench, tmp_path, None)
    assert warm["warm_reused"] >= 1, "\n".join(warm["trace"])
    assert any("(warm)" in line for line in warm["trace"])  # a trial's attempt ran on a leased instance
    cold = night(bench, tmp_path, "0s")
    assert cold["warm_reused"] == 0 and cold["idle_usd"] == 0
    # no boot for the trials that ran warm: the same trials cost less
    assert warm["spend_at_finish"][1] < cold["spend_at_finish"][1]
