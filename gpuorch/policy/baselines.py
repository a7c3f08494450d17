"""The reference policies of Can't Be Late: always on-demand, greedy spot, Uniform Progress.

They are single-region policies. Given several zones they use the zone they are on, else the
first zone with spot (so they stay deterministic), but they are only measured single-region.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuorch.policy.model import OD, SPOT, Action, Job, Observation, Placement, State


def live_spot(state: State) -> Placement | None:
    """The spot placement still running, if any."""
    p = state.placement
    return p if p is not None and p.kind == SPOT else None


def first_spot(state: State, obs: Observation) -> Placement | None:
    """Spot where the job is, else spot in the first zone that has it, else ``None``."""
    running = live_spot(state)
    if running is not None:
        return running
    for zone, up in enumerate(obs.spot):
        if up:
            return Placement(SPOT, zone)
    return None


def deadline_guard(job: Job, state: State, proposed: Action, spot: Placement | None) -> Action:
    """The safety net every policy shares (the reference simulator's "strong guarantee").

    Once finishing needs every remaining tick even with one more changeover, keep a spot
    instance that is already past its changeover (if it is preempted, on-demand plus one
    changeover still fits) and otherwise run on-demand. With free changeovers any available
    ``spot`` is as safe, since falling back costs nothing.
    """
    if state.slack_ticks(job, 1) > 0:
        return proposed
    running = live_spot(state)
    if running is not None and state.changeover_left_s == 0:
        return running
    if job.changeover_s == 0 and spot is not None:
        return spot
    return OD


@dataclass(frozen=True)
class OnDemandPolicy:
    """Always on-demand: the cost ceiling."""

    name: str = "on-demand"

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        return OD


@dataclass(frozen=True)
class GreedyPolicy:
    """Spot whenever available, otherwise idle, until remaining time <= remaining work +
    one changeover; then on-demand to the end (keeping a running spot until preempted)."""

    name: str = "greedy"

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        spot = first_spot(state, obs)
        return deadline_guard(job, state, spot, spot)


@dataclass(frozen=True)
class UniformProgressPolicy:
    """Uniform Progress (Wu et al., NSDI 2024), rule for rule:

    1. Stay on or above the straight line of progress, ``done >= elapsed * work / deadline``:
       when below it and there is no spot, use on-demand to catch up.
    2. Take spot whenever it appears, even below the line, and keep it until preempted.
    3. Hysteresis: leave on-demand (for spot) only once ``done >= (elapsed + 2 changeovers)
       * work / deadline``.
    4. Safety net: when idle or on-demand and remaining time <= remaining work + 2
       changeovers (in whole ticks), on-demand for good; plus :func:`deadline_guard`.
    """

    name: str = "uniform-progress"

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        spot = first_spot(state, obs)
        elapsed = state.elapsed_s(job)
        behind = state.done_s * job.deadline_s < elapsed * job.work_s
        ahead_2d = state.done_s * job.deadline_s > (elapsed + 2 * job.changeover_s) * job.work_s
        action: Action = spot
        if behind and spot is None:
            action = OD
        if state.placement == OD and (spot is None or not ahead_2d):
            action = OD
        if state.slack_ticks(job, 2) <= 0 and live_spot(state) is None:
            action = OD
        return deadline_guard(job, state, action, spot)
