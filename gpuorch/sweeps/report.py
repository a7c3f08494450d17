"""``gpuorch sweep status``: each trial's parameters, latest metrics, cost and state, best first by
the sweep's objective, and the sweep's spend against its cap. Read-only."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.money.cost import attempt_cost
from gpuorch.store.models import Attempt, Sweep
from gpuorch.sweeps.intent import trials_of


def _order(metric: str | None, mode: str) -> Callable[[dict[str, Any]], tuple[int, float, int]]:
    """Trials with a numeric objective first, best first; then the rest by id."""
    def key(t: dict[str, Any]) -> tuple[int, float, int]:
        v = t["metrics"].get(metric) if metric else None
        if isinstance(v, bool) or not isinstance(v, int | float):
            return (1, 0.0, t["id"])
        return (0, v if mode == "min" else -v, t["id"])

    return key


def sweep_report(s: Session, sweep: Sweep, now: datetime) -> dict[str, Any]:
    jobs = trials_of(s, sweep.id or 0)
    cost: dict[int, float] = {}  # by job id
    for a in s.exec(select(Attempt).where(col(Attempt.job_id).in_([j.id for j in jobs]))):
        cost[a.job_id] = cost.get(a.job_id, 0) + attempt_cost(a, now)
    trials = [{
        "id": j.id, "name": j.name, "status": j.status.value, "message": j.message,
        "params": json.loads(j.params) if j.params else {}, "metrics": json.loads(j.metrics) if j.metrics else {},
        "cost": round(cost.get(j.id or 0, 0), 6),
    } for j in jobs]
    trials.sort(key=_order(sweep.objective_metric, sweep.objective_mode))
    metric = sweep.objective_metric
    best = trials[0] if trials and metric and metric in trials[0]["metrics"] else None
    return {
        "id": sweep.id, "name": sweep.name, "status": sweep.status.value, "message": sweep.message,
        "spent": round(sum(cost.values()), 6), "max_cost": sweep.max_cost, "deadline": sweep.deadline,
        "max_parallel": sweep.max_parallel,
        "objective": {"metric": metric, "mode": sweep.objective_mode} if metric else None,
        "counts": dict(Counter(t["status"] for t in trials)), "best": best, "trials": trials,
    }
