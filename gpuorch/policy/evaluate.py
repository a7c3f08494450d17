"""Replay every policy over random windows of real traces and summarise the costs.

Shared by ``gpuorch simulate policy`` and ``bench/policy.py`` so both report the same thing.
Windows: ``windows`` start ticks drawn uniformly with ``numpy.random.default_rng(seed)``
from the ticks common to all traces, one deadline long; every zone is replayed over the same
starts, and the multi-region runs use them too. Ticks before a start are market history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpuorch.policy.baselines import GreedyPolicy, OnDemandPolicy, UniformProgressPolicy
from gpuorch.policy.deadline import GpuorchPolicy
from gpuorch.policy.model import Job, Policy
from gpuorch.policy.optimal import optimal_costs
from gpuorch.policy.simulator import simulate
from gpuorch.policy.traces import Trace

ONLINE: dict[str, Policy] = {
    p.name: p for p in (OnDemandPolicy(), GreedyPolicy(), UniformProgressPolicy(), GpuorchPolicy())
}
POLICY_NAMES: tuple[str, ...] = (*ONLINE, "optimal")
MULTI_REGION_NAMES: tuple[str, ...] = ("gpuorch", "optimal")
"""Only these may use every zone at once; the others are single-region by definition."""


@dataclass(frozen=True)
class Stats:
    """Cost summary of one policy over a set of jobs."""

    mean_cost: float
    p90_cost: float
    missed: int
    jobs: int

    @classmethod
    def of(cls, costs: Sequence[float], missed: Sequence[bool]) -> Stats:
        arr = np.asarray(costs, dtype=float)
        return cls(float(arr.mean()), float(np.percentile(arr, 90)), int(np.sum(missed)), int(arr.size))

    def as_dict(self) -> dict[str, float | int]:
        return {"mean_cost": round(self.mean_cost, 4), "p90_cost": round(self.p90_cost, 4), "missed": self.missed}


@dataclass(frozen=True)
class Report:
    """Per-zone, pooled single-region and (when available) multi-region results."""

    windows: int
    starts: tuple[int, ...]
    per_zone: dict[str, dict[str, Stats]]
    policies: dict[str, Stats]
    multi_region: dict[str, Stats] | None = field(default=None)

    def to_json(self) -> dict[str, object]:
        """The documented ``--json`` shape: ``policies``, ``multi_region`` (if any), ``jobs``."""
        out: dict[str, object] = {"policies": {k: v.as_dict() for k, v in self.policies.items()}}
        if self.multi_region is not None:
            out["multi_region"] = {k: v.as_dict() for k, v in self.multi_region.items()}
        out["jobs"] = self.windows
        return out


def window_starts(length: int, job: Job, windows: int, seed: int) -> np.ndarray:
    """Start ticks of ``windows`` random windows, each ``job.deadline_ticks`` long."""
    last = length - job.deadline_ticks
    if last < 0:
        raise ValueError(f"traces have {length} ticks, fewer than the deadline's {job.deadline_ticks}")
    return np.sort(np.random.default_rng(seed).integers(0, last + 1, size=windows))


Runs = dict[str, list[tuple[float, bool]]]
"""Per policy name, ``(cost, missed)`` for each window."""


def _runs(policies: dict[str, Policy], job: Job, avail: np.ndarray, starts: np.ndarray) -> Runs:
    """Costs and misses of each online policy and of the optimum, one entry per start."""
    out: Runs = {}
    for name, policy in policies.items():
        outcomes = [simulate(policy, job, avail, int(s)) for s in starts]
        out[name] = [(o.cost, o.missed) for o in outcomes]
    best = optimal_costs(job, np.stack([avail[:, s : s + job.deadline_ticks] for s in starts]))
    out["optimal"] = [(float(c), not np.isfinite(c)) for c in best]
    return out


def _stats(runs: Runs) -> dict[str, Stats]:
    return {name: Stats.of([c for c, _ in rs], [m for _, m in rs]) for name, rs in runs.items()}


def evaluate(traces: Sequence[Trace], job: Job, windows: int, seed: int) -> Report:
    """Replay all policies single-region on each trace and, with several traces of the same
    length (the same period), ``gpuorch`` and ``optimal`` multi-region over all of them."""
    if not traces:
        raise ValueError("no traces")
    if any(t.gap_s != job.gap_s for t in traces):
        raise ValueError("every trace must have the job's gap_seconds")
    length = min(len(t) for t in traces)
    starts = window_starts(length, job, windows, seed)
    per_zone_runs = {t.zone: _runs(ONLINE, job, t.available[None, :length], starts) for t in traces}
    pooled: Runs = {name: [r for runs in per_zone_runs.values() for r in runs[name]] for name in POLICY_NAMES}
    multi = None
    if len(traces) > 1 and len({len(t) for t in traces}) == 1:
        avail = np.stack([t.available for t in traces])
        online = {name: ONLINE[name] for name in MULTI_REGION_NAMES if name in ONLINE}
        multi = _stats(_runs(online, job, avail, starts))
    return Report(
        windows=windows,
        starts=tuple(int(s) for s in starts),
        per_zone={zone: _stats(runs) for zone, runs in per_zone_runs.items()},
        policies=_stats(pooled),
        multi_region=multi,
    )
