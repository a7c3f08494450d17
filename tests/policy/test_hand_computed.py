"""Every policy and the optimum on traces small enough to check by hand.

Job: 4 h of work, deadline 8 h, changeover 0.5 h, hourly ticks, spot $1 and on-demand $3 a
tick. A start's first tick makes 0.5 h of progress, every later tick 1 h.
"""

from __future__ import annotations

import numpy as np
import pytest
from policy_helpers import hourly_job, trace

from gpuorch.policy import (
    OD,
    SPOT,
    GpuorchPolicy,
    GreedyPolicy,
    Job,
    Observation,
    OnDemandPolicy,
    Placement,
    State,
    UniformProgressPolicy,
)
from gpuorch.policy.optimal import optimal_costs, optimal_plan
from gpuorch.policy.simulator import PolicyError, simulate

# A: spot for 2 h, a 2 h outage, spot to the end.
# B: a 3 h outage, then spot for 2 h only.
CASES = {
    # trace: {policy: (cost, spot ticks, on-demand ticks)}
    "11001111": {
        "on-demand": (15, 0, 5),  # 4.5 h on-demand -> 5 ticks
        # Spot t0-1 (1.5 h done), idle through the outage (slack stays > 0), spot t4-6.
        "greedy": (5, 5, 0),
        # Back on the line at t3 (1.5 h at 3/8 of the time) so it idles; at t4 remaining
        # time 4 h = remaining 2.5 h + 2 changeovers rounded up -> on-demand for good, t4-6.
        "uniform-progress": (11, 2, 3),
        # At t2, slack after idling (2 ticks) falls below the reserve (4 x 6/8 = 3): on-demand
        # t2-3 (3.0 h done), spot t4-5.
        "gpuorch": (10, 4, 2),
    },
    "00011000": {
        # Idles while slack lasts; at t3 no slack is left for a spot start -> on-demand t3-7.
        "on-demand": (15, 0, 5),
        "greedy": (15, 0, 5),
        # Behind the line from t1: on-demand t1-5; spot never comes 2 changeovers ahead.
        "uniform-progress": (15, 0, 5),
        # No slack to spare above the reserve at t0: on-demand t0-2 (2.5 h), spot t3-4.
        "gpuorch": (11, 2, 3),
    },
}
OPTIMAL = {"11001111": 5, "00011000": 11}
POLICIES = {p.name: p for p in (OnDemandPolicy(), GreedyPolicy(), UniformProgressPolicy(), GpuorchPolicy())}


@pytest.mark.parametrize("row", CASES)
@pytest.mark.parametrize("name", list(POLICIES))
def test_policy_costs_match_hand_computation(row: str, name: str) -> None:
    outcome = simulate(POLICIES[name], hourly_job(), trace(row))
    assert (outcome.cost, outcome.spot_ticks, outcome.on_demand_ticks) == pytest.approx(CASES[row][name])
    assert not outcome.missed


@pytest.mark.parametrize("row", CASES)
def test_optimum_matches_hand_computation(row: str) -> None:
    job = hourly_job()
    assert optimal_costs(job, trace(row)[None])[0] == pytest.approx(OPTIMAL[row])
    plan = optimal_plan(job, trace(row))
    assert plan is not None
    assert sum(job.tick_cost(a.kind) for a in plan if a is not None) == pytest.approx(OPTIMAL[row])


def test_on_demand_reproduces_published_cost_exactly() -> None:
    """48 h + one changeover on 195 s ticks: 888 ticks at 0.1 h, 890 at 0.2 h (rounded up)."""
    for changeover_h, published in ((0.1, 147.19), (0.2, 147.52)):
        job = Job.from_hours(
            work_h=48, deadline_h=52, changeover_h=changeover_h, gap_s=195, on_demand_price=3.06, spot_price=0.9731
        )
        outcome = simulate(OnDemandPolicy(), job, np.zeros((1, job.deadline_ticks), dtype=bool))
        assert round(outcome.cost, 2) == published


def test_changeover_spans_ticks_and_restarts_after_preemption() -> None:
    """0.1 h = 360 s on 195 s ticks: the first tick makes nothing, the second 30 s."""
    job = Job.from_hours(work_h=0.2, deadline_h=1, changeover_h=0.1, gap_s=195, on_demand_price=3, spot_price=1)
    # Spot 3 ticks (0 + 30 + 195 = 225 s done), preempted, spot again: 720 - 225 = 495 s more
    # need 360 + 495 = 855 s -> 5 ticks. Total 8 spot ticks, 2 changeovers.
    outcome = simulate(GreedyPolicy(), job, trace("111011111111111111"))
    assert (outcome.spot_ticks, outcome.on_demand_ticks, outcome.changeovers, outcome.ticks) == (8, 0, 2, 9)


def test_zero_changeover_is_free_to_switch() -> None:
    job = hourly_job(changeover_h=0)
    assert simulate(OnDemandPolicy(), job, trace("00000000")).cost == 12
    assert optimal_costs(job, trace("10101010")[None])[0] == pytest.approx(4)
    # No slack at all: the guard may still alternate spot and on-demand for free.
    tight = hourly_job(deadline_h=4, changeover_h=0)
    outcome = simulate(GreedyPolicy(), tight, trace("1010"))
    assert (outcome.cost, outcome.spot_ticks, outcome.missed) == (8, 2, False)
    assert optimal_costs(tight, trace("1010")[None])[0] == pytest.approx(8)


def test_spot_without_capacity_is_rejected() -> None:
    class AlwaysSpot:
        name = "always-spot"

        def decide(self, job, state, obs):
            return Placement(SPOT, 0)

    with pytest.raises(PolicyError, match="zone 0 at tick 2"):
        simulate(AlwaysSpot(), hourly_job(), trace("11011111"))


def test_on_demand_zone_is_irrelevant() -> None:
    """Moving on-demand between zones is no move at all: one changeover, 5 ticks."""

    class Wandering:
        name = "wandering"

        def decide(self, job, state, obs):
            return Placement("on-demand", state.tick % 2)

    outcome = simulate(Wandering(), hourly_job(), trace("00000000", "00000000"))
    assert (outcome.cost, outcome.changeovers) == (15, 1)
    assert Placement("on-demand", 0) == OD


# The rules of GpuorchPolicy that turn on how many changeovers the slack still covers, on a 48 h
# job of 1-minute ticks and 10-minute changeovers, 10 h in (``State`` and ``Observation`` by hand).
RULES_JOB = Job.from_hours(work_h=48, deadline_h=56, changeover_h=1 / 6, gap_s=60, on_demand_price=3, spot_price=1)


def state_with_slack(changeovers: float, placement: Placement | None = None) -> State:
    """The state 10 h in whose slack, once one more changeover is paid, is ``changeovers`` changeovers."""
    tick = 600
    slack_ticks = round(changeovers * 10)
    done = (tick + 10 + slack_ticks) * 60 - (RULES_JOB.deadline_ticks * 60 - RULES_JOB.work_s)
    state = State(tick, done, placement, 0)
    assert state.slack_ticks(RULES_JOB, 1) == slack_ticks
    return state


def market(*up_minutes: int) -> Observation:
    return Observation(tuple(m > 0 for m in up_minutes), tuple(up_minutes), tuple(1.0 for _ in up_minutes), 1.0)


def test_no_spot_and_on_demand_would_be_for_good_waits_while_a_spot_start_stays_safe() -> None:
    policy = GpuorchPolicy()
    # 1.5 changeovers of slack after on-demand's start-up: too little ever to move to spot and
    # back (2), so on-demand now would be for good: it waits (a spot start needs more than 1)
    assert policy.decide(RULES_JOB, state_with_slack(1.5), market(0, 0)) is None
    # 2.5: on-demand now still leaves room to leave it later; the reserve rule sends it there
    assert policy.decide(RULES_JOB, state_with_slack(2.5), market(0, 0)) == OD
    # 1: a spot start could no longer fall back, so waiting buys nothing: on-demand
    assert policy.decide(RULES_JOB, state_with_slack(1), market(0, 0)) == OD


def test_leaving_on_demand_needs_a_longer_run_when_few_changeovers_are_left() -> None:
    policy, spot = GpuorchPolicy(), Placement(SPOT, 1)
    # 20 changeovers of slack: a run of 2 changeovers (20 min) is enough to leave on-demand
    assert policy.decide(RULES_JOB, state_with_slack(20, OD), market(0, 25)) == spot
    # 4 left, fewer than one per 6 h of the 48 h of work (8): it needs 2 x 8/4 = 4 changeovers (40 min)
    assert policy.decide(RULES_JOB, state_with_slack(4, OD), market(0, 25)) == OD
    assert policy.decide(RULES_JOB, state_with_slack(4, OD), market(0, 40)) == spot
    # from idle, spot is taken at once whatever is left (the wait would spend the same slack)
    assert policy.decide(RULES_JOB, state_with_slack(4), market(0, 1)) == spot
    # a 4 h job needs fewer changeovers (one per 6 h: 0.7): with 5 left, a run of 2 changeovers is enough
    short = Job.from_hours(work_h=4, deadline_h=8, changeover_h=1 / 6, gap_s=60, on_demand_price=3, spot_price=1)
    assert policy.confirm_s(short, State(240, short.work_s - 3 * 3600 + 60, OD, 0)) == 2 * 600
