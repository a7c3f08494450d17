"""The optimum is exact and a lower bound; no policy misses a deadline it can meet."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuorch.policy import (
    OD,
    SPOT,
    Action,
    GpuorchPolicy,
    GreedyPolicy,
    Job,
    OnDemandPolicy,
    Placement,
    UniformProgressPolicy,
)
from gpuorch.policy.optimal import OmniscientPolicy, optimal_costs, optimal_plan
from gpuorch.policy.simulator import simulate

ONLINE = (OnDemandPolicy(), GreedyPolicy(), UniformProgressPolicy(), GpuorchPolicy())


def markov_trace(rng: np.random.Generator, zones: int, ticks: int) -> np.ndarray:
    """Bursty availability like the real traces: runs of up and down of random mean length."""
    out = np.zeros((zones, ticks), dtype=bool)
    for z in range(zones):
        stay_up, stay_down = rng.uniform(0.5, 0.98), rng.uniform(0.3, 0.95)
        up = bool(rng.random() < 0.5)
        for t in range(ticks):
            out[z, t] = up
            up = rng.random() < (stay_up if up else 1 - stay_down)
    return out


def random_job(rng: np.random.Generator, gap_s: int = 195) -> Job:
    work_s = int(rng.integers(20, 60)) * gap_s - int(rng.integers(0, gap_s))
    changeover_s = int(rng.choice([0, 90, 195, 360, 720]))
    need = -(-(work_s + changeover_s) // gap_s)
    deadline_ticks = need + int(rng.choice([0, 1, 5, 20, 60]))  # from no slack to plenty
    return Job(work_s, deadline_ticks * gap_s, changeover_s, gap_s, 3.06, 0.9731)


class Scripted:
    """Plays a fixed list of actions."""

    name = "scripted"

    def __init__(self, plan: tuple[Action, ...]) -> None:
        self.plan = plan

    def decide(self, job, state, obs):
        return self.plan[state.tick]


def brute_force_optimum(job: Job, avail: np.ndarray) -> float:
    """The cheapest finishing schedule by trying every action sequence in the simulator."""
    ticks = job.deadline_ticks
    choices = [[None, OD, *(Placement(SPOT, z) for z in range(avail.shape[0]) if avail[z, t])] for t in range(ticks)]
    best = np.inf
    for plan in itertools.product(*choices):
        outcome = simulate(Scripted(plan), job, avail)
        if not outcome.missed:
            best = min(best, outcome.cost)
    return best


@pytest.mark.parametrize("case", range(12))
def test_dynamic_programme_equals_brute_force(case: int) -> None:
    rng = np.random.default_rng(case)
    zones = 1 + case % 2
    gap = 600
    job = Job(
        work_s=int(rng.integers(2, 5)) * gap - int(rng.integers(0, gap)),
        deadline_s=(6 if zones == 2 else 7) * gap,
        changeover_s=int(rng.choice([0, 300, 600, 900])),
        gap_s=gap,
        on_demand_price=3.0,
        spot_price=1.0,
    )
    avail = rng.random((zones, job.deadline_ticks)) < 0.6
    assert optimal_costs(job, avail[None])[0] == pytest.approx(brute_force_optimum(job, avail))


@pytest.mark.parametrize("case", range(25))
def test_optimum_is_a_lower_bound_and_nobody_misses(case: int) -> None:
    rng = np.random.default_rng(1000 + case)
    job = random_job(rng)
    zones = 1 if case % 3 else 3
    history = int(rng.integers(0, 50))
    avail = markov_trace(rng, zones, history + job.deadline_ticks)
    window = avail[:, history:]
    best = optimal_costs(job, window[None])[0]
    assert np.isfinite(best)  # on-demand from the start always fits
    for policy in ONLINE:
        outcome = simulate(policy, job, avail, history)
        assert not outcome.missed, policy.name
        assert best <= outcome.cost + 1e-9, policy.name
    plan = optimal_plan(job, window)
    assert plan is not None
    replay = simulate(OmniscientPolicy(tuple(plan)), job, window)
    assert not replay.missed
    assert replay.cost == pytest.approx(best)


def test_batched_solve_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    job = random_job(rng)
    windows = np.stack([markov_trace(rng, 2, job.deadline_ticks) for _ in range(5)])
    together = optimal_costs(job, windows, chunk=2)
    alone = [optimal_costs(job, w[None])[0] for w in windows]
    assert together == pytest.approx(alone)


def test_infeasible_deadline_has_no_plan() -> None:
    job = Job(work_s=3600, deadline_s=3600, changeover_s=60, gap_s=600, on_demand_price=3.0, spot_price=1.0)
    avail = np.ones((1, job.deadline_ticks), dtype=bool)
    assert not job.feasible()
    assert optimal_costs(job, avail[None])[0] == np.inf
    assert optimal_plan(job, avail) is None
