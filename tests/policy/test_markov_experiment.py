"""The model-based experiment of bench/policy_markov.py (session 7, not shipped): it learns from
the market's past only, and its decisions keep the deadline.

The script is an experiment, not the policy the daemon runs; these tests keep its recorded rows
(docs/benchmarks.md, "Session 7") meaningful: a model that peeked at the future would make them
worthless.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpuorch.policy.model import Job
from gpuorch.policy.simulator import simulate
from gpuorch.policy.traces import load_trace, trace_files

REPO = Path(__file__).resolve().parents[2]
V100 = REPO / "tests" / "data" / "spot-traces" / "aws-v100-2023-04"


@pytest.fixture(scope="module")
def pm():
    spec = importlib.util.spec_from_file_location("policy_markov", REPO / "bench" / "policy_markov.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def avail() -> np.ndarray:
    return np.stack([load_trace(p).available for p in trace_files(V100)])


def short_job(changeover_h: float = 0.1) -> Job:
    return Job.from_hours(work_h=4, deadline_h=5, changeover_h=changeover_h, gap_s=32,
                          on_demand_price=3.06, spot_price=0.9731)  # fmt: skip


class Recorder:
    """Wraps a policy and records every decision."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.actions = inner, inner.name, []

    def decide(self, job, state, obs):
        action = self.inner.decide(job, state, obs)
        self.actions.append(action)
        return action


def test_shuffling_the_future_of_a_window_does_not_change_the_decisions_before_it(pm, avail) -> None:
    job, start, cut = short_job(), 6_000, 300  # decisions at ticks < cut of the window
    rng = np.random.default_rng(3)
    future = avail.copy()
    tail = future[:, start + cut :]
    future[:, start + cut :] = tail[:, rng.permutation(tail.shape[1])]
    seen = []
    for a in (avail, future):
        rec = Recorder(pm.MarkovPolicy(job, a, start, "all", refresh_h=1.0))
        simulate(rec, job, a, start)
        seen.append(rec.actions[:cut])
    assert seen[0] == seen[1]
    # and the market model itself, learned at the start, ignores everything after it
    assert all(np.array_equal(x, y) for x, y in zip(pm.learn(avail, 32, start, 6, 100.0),
                                                     pm.learn(future, 32, start, 6, 100.0), strict=True))  # fmt: skip


def test_the_follower_state_of_a_tick_depends_on_that_tick_and_before_only(pm, avail) -> None:
    cut = 5_000
    changed = avail.copy()
    changed[:, cut:] = ~changed[:, cut:]
    a, b = pm.follower(avail, 32)[0], pm.follower(changed, 32)[0]
    assert np.array_equal(a[:cut], b[:cut]) and not np.array_equal(a, b)


@pytest.mark.parametrize("use", ["all", "leave"])
@pytest.mark.parametrize("changeover_h", [0.1, 0.2])
def test_it_never_misses_a_deadline_on_the_v100_traces(pm, avail, use, changeover_h) -> None:
    job = short_job(changeover_h)
    starts = np.linspace(200, avail.shape[1] - job.deadline_ticks - 1, 12).astype(int)
    runs = [simulate(pm.MarkovPolicy(job, avail, int(s), use), job, avail, int(s)) for s in starts]
    assert not any(r.missed for r in runs)
