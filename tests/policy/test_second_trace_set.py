"""The second, independent V100 trace set (tests/data/spot-traces/aws-v100-2023-04, 32 s probes):
it ships with the repository, the simulator and the optimum reproduce the data README's figures
from two independent implementations on it, and the gpuorch policy's single-region properties hold.

The multi-region 5% target is measured by ``bench/policy.py`` (docs/benchmarks.md), not here:
on this set it is not met (9.2%, 13.4% and 9.4% above the optimum at 52 h / 0.1 h, 52 h / 0.2 h
and 70 h / 0.2 h). The multi-region test below guards the 52 h / 0.1 h level reached, no more.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuorch.policy.baselines import GreedyPolicy, OnDemandPolicy, UniformProgressPolicy
from gpuorch.policy.deadline import GpuorchPolicy
from gpuorch.policy.evaluate import window_starts
from gpuorch.policy.model import Job
from gpuorch.policy.optimal import optimal_costs
from gpuorch.policy.simulator import market_view, simulate
from gpuorch.policy.traces import load_trace, trace_files

V100 = Path(__file__).resolve().parents[1] / "data" / "spot-traces" / "aws-v100-2023-04"
AVAILABLE = {"us-east-1c": 0.31, "us-east-1f": 0.59, "us-west-2b": 0.79, "us-west-2c": 0.73}  # data README


@pytest.fixture(scope="module")
def setting() -> tuple[np.ndarray, Job, np.ndarray]:
    """The README's reference setting: 48 h job, 52 h deadline, 0.1 h changeover, 10 windows, seed 0."""
    traces = [load_trace(p) for p in trace_files(V100)]
    avail = np.stack([t.available for t in traces])
    job = Job.from_hours(work_h=48, deadline_h=52, changeover_h=0.1, gap_s=traces[0].gap_s,
                         on_demand_price=3.06, spot_price=0.9731)  # fmt: skip
    return avail, job, window_starts(avail.shape[1], job, 10, 0)


def single_region_mean(policy, avail: np.ndarray, job: Job, starts: np.ndarray) -> tuple[float, int]:
    runs = [simulate(policy, job, avail[z : z + 1], int(s)) for z in range(avail.shape[0]) for s in starts]
    return float(np.mean([r.cost for r in runs])), sum(r.missed for r in runs)


def test_the_set_ships_with_the_repository_as_the_readme_describes_it() -> None:
    traces = {p.stem.split("_")[0]: load_trace(p) for p in trace_files(V100)}
    assert set(traces) == set(AVAILABLE)
    for zone, t in traces.items():
        assert t.gap_s == 32 and len(t) == 19_961
        assert round(float(t.available.mean()), 2) == AVAILABLE[zone]


def test_simulator_and_optimum_reproduce_the_independent_reference_figures(setting) -> None:
    avail, job, starts = setting
    assert single_region_mean(OnDemandPolicy(), avail, job, starts)[0] == pytest.approx(147.21, abs=0.005)
    greedy, _ = single_region_mean(GreedyPolicy(), avail, job, starts)
    assert 128.6 - 0.05 <= greedy <= 128.7 + 0.05  # the README rounds to 0.1 $
    windows = [avail[z : z + 1, s : s + job.deadline_ticks] for z in range(avail.shape[0]) for s in starts]
    single = optimal_costs(job, np.stack(windows))
    assert 90.9 - 0.05 <= single.mean() <= 91.2 + 0.05
    multi = optimal_costs(job, np.stack([avail[:, s : s + job.deadline_ticks] for s in starts]))
    assert 59.1 - 0.05 <= multi.mean() <= 59.4 + 0.05


def test_gpuorch_single_region_costs_no_more_than_uniform_progress_and_misses_nothing(setting) -> None:
    avail, job, starts = setting
    up, up_missed = single_region_mean(UniformProgressPolicy(), avail, job, starts)
    ours, missed = single_region_mean(GpuorchPolicy(), avail, job, starts)
    assert 104.8 - 0.05 <= up <= 109.5 + 0.05  # the README's Uniform Progress range
    assert missed == up_missed == 0
    assert ours <= up


def test_multi_region_gpuorch_misses_nothing_and_stays_within_ten_percent_of_the_optimum(setting) -> None:
    """A regression guard at the level measured (+9.2%), not the 5% target, which is not met."""
    avail, job, starts = setting
    runs = [simulate(GpuorchPolicy(), job, avail, int(s)) for s in starts]
    best = optimal_costs(job, np.stack([avail[:, s : s + job.deadline_ticks] for s in starts]))
    assert not any(r.missed for r in runs)
    assert np.mean([r.cost for r in runs]) <= 1.10 * best.mean()


def test_uptime_looks_back_one_day_whatever_the_tick() -> None:
    """With hourly ticks a day is 24 ticks (not the 443 of 195 s ticks): a zone up for the first
    day and down for the second has had no uptime over the last day at the end of the second."""
    avail = np.array([[True] * 24 + [False] * 24])
    _, uptime = market_view(avail, 0, 48, gap_s=3600)
    assert uptime[0, 23] == 1.0
    assert uptime[0, 47] == 0.0
    assert uptime[0, 35] == pytest.approx(12 / 24)
