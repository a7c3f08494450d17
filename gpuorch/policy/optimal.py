"""The omniscient optimum: the cheapest schedule that meets the deadline, knowing the trace.

Exact dynamic programme over ticks. The state after tick ``t`` is the mode that ran in it
(idle, on-demand, or spot in zone ``z``) and the *waste* so far, ``t * gap - progress``:
time lost to idling and changeovers. Waste is kept on the grid ``u = gcd(gap, changeover)``
seconds (15 s for 195 s ticks and 0.1 h or 0.2 h changeovers), so the state is exact, and
only waste up to the slack ``deadline_ticks * gap - work`` can still finish; on the 48 h /
52 h setting that is 961 levels, instead of tracking 11,520 levels of work done.

Charging each start its full changeover up front is exact for the simulator's rules: a run
shorter than its changeover makes no progress there and more waste here, but such a run is
never part of an optimum (idling instead loses the same time for free), and every longer run
wastes exactly one changeover in both. Starting the mode one is already in is allowed here
and never optimal, which spares a "min over the other modes" per mode.

Many windows are solved at once: arrays are ``[mode, window, waste]`` and each tick is a
handful of in-place numpy operations, so 9 zones x 20 windows of a 48 h job take seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuorch.policy.model import OD, SPOT, Action, Job, Observation, Placement, State

_CACHE_CELLS = 200_000


@dataclass(frozen=True, slots=True)
class _Grid:
    unit_s: int
    gap: int  # units per tick
    changeover: int  # units per changeover
    work: int  # units of progress needed
    max_waste: int  # waste beyond this cannot finish in time

    @classmethod
    def of(cls, job: Job) -> _Grid:
        unit = math.gcd(job.gap_s, job.changeover_s)
        work = -(-job.work_s // unit)
        gap = job.gap_s // unit
        return cls(unit, gap, job.changeover_s // unit, work, job.deadline_ticks * gap - work)


_Trail = tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[int, int, int]], _Grid]
"""Per tick (argmin mode, kept-running mask); the improving finishes (tick, mode, waste)."""


def _solve(job: Job, avail: np.ndarray, record: bool) -> tuple[np.ndarray, _Trail | None]:
    """Run the programme on ``avail[window, zone, tick]``; see :func:`optimal_costs`.

    ``value[mode, b, w]`` is the cheapest way to end the current tick in ``mode`` having
    wasted ``w`` units; mode 0 is idle, 1 on-demand, ``2 + z`` spot in zone ``z``. Updates are
    in place and mode-major (contiguous slices): this loop is the whole cost of the benchmark.
    """
    batch, zones, _ = avail.shape
    grid = _Grid.of(job)
    best = np.full(batch, np.inf)
    if grid.max_waste < 0:
        return best, None
    levels = grid.max_waste + 1
    gap, co = min(grid.gap, levels), min(grid.changeover, levels)
    value = np.full((zones + 2, batch, levels), np.inf)
    value[0, :, 0] = 0.0  # idle, nothing wasted, before the first tick
    cheapest = np.empty((batch, levels))
    start = np.full((batch, levels), np.inf)  # a start wastes one changeover up front
    run_cost = np.array([job.tick_cost("on-demand")] + [job.tick_cost("spot")] * zones)[:, None, None]
    no_spot = ~np.ascontiguousarray(avail.transpose(2, 1, 0))[:, :, :, None]  # [tick, zone, b, 1]
    runs = value[1:]
    trail: list[tuple[np.ndarray, np.ndarray]] = []
    finish: list[tuple[int, int, int]] = []
    for t in range(job.deadline_ticks):
        np.minimum(value[0], value[1], out=cheapest)
        for mode in range(2, zones + 2):
            np.minimum(cheapest, value[mode], out=cheapest)
        start[:, co:] = cheapest[:, : levels - co]
        if record:
            trail.append((value.argmin(axis=0), runs <= start))
        np.minimum(runs, start, out=runs)
        runs += run_cost
        np.copyto(value[2:], np.inf, where=no_spot[t])  # spot only where the trace has it
        value[0, :, :gap] = np.inf
        value[0, :, gap:] = cheapest[:, : levels - gap]  # idle: a whole tick wasted, for free
        threshold = min((t + 1) * grid.gap - grid.work, grid.max_waste)
        if threshold >= 0:  # progress (t + 1) * gap - waste covers the work: done
            cost = runs[:, :, : threshold + 1].min(axis=(0, 2))
            if record and cost[0] < best[0]:
                where = np.unravel_index(runs[:, 0, : threshold + 1].argmin(), (zones + 1, threshold + 1))
                finish.append((t, int(where[0]) + 1, int(where[1])))
            np.minimum(best, cost, out=best)
    return best, (trail, finish, grid)


def optimal_costs(job: Job, avail: np.ndarray, chunk: int | None = None) -> np.ndarray:
    """Minimum cost per window for ``avail[window, zone, tick]`` (``inf`` when infeasible).

    With one zone this is the single-region optimum; with several the job may start or move
    to spot in any zone (each move a changeover) or run on-demand. Windows are solved
    ``chunk`` at a time (by default as many as keep the state near 200k cells, which stays
    in cache: twice as fast as one big batch).
    """
    avail = np.asarray(avail, dtype=bool)
    if chunk is None:
        cells = (avail.shape[1] + 2) * (max(_Grid.of(job).max_waste, 0) + 1)
        chunk = max(1, _CACHE_CELLS // cells)
    parts = [_solve(job, avail[i : i + chunk], record=False)[0] for i in range(0, avail.shape[0], chunk)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _mode_action(mode: int) -> Action:
    return None if mode == 0 else OD if mode == 1 else Placement(SPOT, mode - 2)


def optimal_plan(job: Job, avail: np.ndarray) -> list[Action] | None:
    """One optimal schedule for ``avail[zone, tick]``, an action per tick, or ``None``."""
    best, extra = _solve(job, np.asarray(avail, dtype=bool)[None], record=True)
    if not np.isfinite(best[0]) or extra is None:
        return None
    trail, finish, grid = extra
    last, mode, waste = finish[-1]
    plan: list[Action] = [None] * (last + 1)
    for t in range(last, -1, -1):
        plan[t] = _mode_action(mode)
        argmin, keep = trail[t]
        if mode == 0:
            waste -= grid.gap
        elif keep[mode - 1, 0, waste]:
            continue
        else:
            waste -= grid.changeover
        mode = int(argmin[0, waste])
    return plan


@dataclass(frozen=True)
class OmniscientPolicy:
    """Replays a precomputed plan (from :func:`optimal_plan`) through the common interface."""

    plan: tuple[Action, ...]
    name: str = "optimal"

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        return self.plan[state.tick] if state.tick < len(self.plan) else None
