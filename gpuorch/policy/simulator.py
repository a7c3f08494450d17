"""Replay one online policy over one window of spot availability.

The tick semantics are those of :mod:`gpuorch.policy.model` (they mirror the Can't Be Late
simulator). ``avail`` is a boolean array ``[zones, ticks]``; the job starts at tick ``start``
and the ticks before it are market history the policy may look at (as the daemon, which
watches the spot market all along, would know it). A single-region run passes one zone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuorch.policy.model import OD, SPOT, Action, Job, Observation, Policy, State


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one job: what it cost and whether it met the deadline."""

    cost: float
    missed: bool
    ticks: int
    spot_ticks: int
    on_demand_ticks: int
    changeovers: int


class PolicyError(RuntimeError):
    """A policy asked for something the market does not offer (spot where there is none)."""


LOOKBACK_S = 86_400
"""How far back ``Observation.uptime`` looks: one day, whatever the tick (443 ticks of 195 s)."""


def lookback_ticks(gap_s: int) -> int:
    """:data:`LOOKBACK_S` in whole ticks of ``gap_s`` (rounded down, at least one)."""
    return max(1, LOOKBACK_S // gap_s)


def market_view(avail: np.ndarray, start: int, ticks: int, gap_s: int = 195) -> tuple[np.ndarray, np.ndarray]:
    """``(up_ticks, uptime)``, each ``[zones + 1, ticks]``, for the ticks ``start .. start+ticks``.

    ``up_ticks``: the length of the current run of availability (history included);
    ``uptime``: the fraction of the last day (:func:`lookback_ticks`) (or of all the history
    there is) with spot available. Both only look backwards. The extra last row is for "spot
    in any zone".
    """
    avail = np.vstack([avail, avail.any(axis=0)])
    end = start + ticks
    idx = np.arange(end)
    last_down = np.maximum.accumulate(np.where(avail[:, :end], -1, idx), axis=1)
    up = np.where(avail[:, :end], idx - last_down, 0)
    ups = np.concatenate([np.zeros((avail.shape[0], 1)), np.cumsum(avail[:, :end], axis=1)], axis=1)
    lo = np.maximum(idx - lookback_ticks(gap_s) + 1, 0)
    uptime = (ups[:, idx + 1] - ups[:, lo]) / (idx + 1 - lo)
    return up[:, start:end], uptime[:, start:end]


def simulate(policy: Policy, job: Job, avail: np.ndarray, start: int = 0) -> Outcome:
    """Run ``policy`` from tick ``start`` until the job is done or the deadline passes."""
    avail = np.asarray(avail, dtype=bool)
    if avail.ndim != 2 or not 0 <= start <= avail.shape[1] - job.deadline_ticks:
        raise ValueError("avail must be [zones, ticks] and cover the deadline after start")
    zones = avail.shape[0]
    up_ticks, uptime = market_view(avail, start, job.deadline_ticks, job.gap_s)
    spot_now = avail[:, start : start + job.deadline_ticks].T.tolist()
    up_now = up_ticks[:-1].T.tolist()
    uptime_now = uptime[:-1].T.tolist()
    any_uptime = uptime[-1].tolist()
    done = changeover_left = spot_ticks = od_ticks = changeovers = 0
    placement: Action = None
    tick = 0
    while tick < job.deadline_ticks and done < job.work_s:
        now = spot_now[tick]
        if placement is not None and placement.kind == SPOT and not now[placement.zone]:
            placement = None  # preempted: the next start pays a changeover
        state = State(tick, done, placement, changeover_left if placement else 0)
        obs = Observation(tuple(now), tuple(up_now[tick]), tuple(uptime_now[tick]), any_uptime[tick])
        action = policy.decide(job, state, obs)
        if action is not None:
            if action.kind != SPOT:
                action = OD  # on-demand is the same everywhere: moving it is no changeover
            elif not (0 <= action.zone < zones and now[action.zone]):
                raise PolicyError(f"{policy.name} chose spot in zone {action.zone} at tick {tick} without capacity")
            if action != placement:
                changeover_left = job.changeover_s
                changeovers += 1
            progress = max(job.gap_s - changeover_left, 0)
            changeover_left -= job.gap_s - progress
            done = min(done + progress, job.work_s)
            if action.kind == SPOT:
                spot_ticks += 1
            else:
                od_ticks += 1
        placement = action
        tick += 1
    cost = spot_ticks * job.tick_cost("spot") + od_ticks * job.tick_cost("on-demand")
    return Outcome(cost, done < job.work_s, tick, spot_ticks, od_ticks, changeovers)
