"""``gpuorch cost``: what was billed since a point in time, grouped by job, sweep, provider or
UTC day. Costs follow the billing model of ``gpuorch.money.cost`` (a charge lands when its increment
begins), so the day rows add up to the total. Read-only."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from gpuorch.money import storage
from gpuorch.money.caps import day_start
from gpuorch.money.cost import cost_between
from gpuorch.store.models import Attempt, Job, Sweep
from gpuorch.warm.ledger import report_rows as idle_rows

GROUPS = ("job", "sweep", "provider", "day")


def _days(a: Attempt, since: datetime | None, now: datetime) -> list[tuple[str, float]]:
    """The attempt's cost per UTC day, from ``since`` (or its launch) to its end (or now)."""
    if a.launched_at is None:  # not billed yet (cost_report reads launched attempts only)
        return []
    start = max(a.launched_at, since) if since else a.launched_at
    end = min(a.ended_at or now, now)
    out: list[tuple[str, float]] = []
    day = day_start(start)
    while day <= end:
        nxt = day + timedelta(days=1)
        out.append((f"{day:%Y-%m-%d}", cost_between(a, max(day, start), nxt, now)))
        day = nxt
    return out


def cost_report(s: Session, since: datetime | None, now: datetime, by: str) -> dict[str, Any]:
    """``{"since", "until", "by", "total", "idle", "rows": [{"key", "cost", "idle", "attempts", ...}]}``.

    ``cost`` includes the idle time of warm instances (spec ``keep_warm``: billed to the job that
    left each warm, as the caps count it); ``idle`` is that part alone."""
    q = select(Attempt, Job).join(Job, col(Job.id) == col(Attempt.job_id)).where(col(Attempt.launched_at).is_not(None))
    if since is not None:
        q = q.where(or_(col(Attempt.ended_at).is_(None), col(Attempt.ended_at) >= since))
    sweeps = {w.id: w for w in s.exec(select(Sweep))}
    rows: dict[Any, dict[str, Any]] = {}
    counted: dict[Any, set[tuple[int, int]]] = defaultdict(set)
    warm = list(idle_rows(s, since))
    idle = {id(a) for a, _ in warm}
    for a, job in [*s.exec(q), *storage.report_rows(s, since), *warm]:  # + job volumes' storage, warm idle time
        parts = _days(a, since, now) if by == "day" else [(None, cost_between(a, since, now, now))]
        for day, c in parts:
            sweep = sweeps.get(job.sweep_id)
            groups: dict[str, tuple[Any, dict[str, Any]]] = {
                "job": (job.id, {"job": job.name, "sweep": sweep.name if sweep else None, "status": job.status.value}),
                "sweep": (sweep.name if sweep else "(no sweep)", {"max_cost": sweep.max_cost if sweep else None}),
                "provider": (a.provider, {}),
                "day": (day, {}),
            }
            key, extra = groups[by]
            row = rows.setdefault(key, {"key": key, "cost": 0.0, "idle": 0.0, "attempts": 0, **extra})
            row["cost"] += c
            row["idle"] += c if id(a) in idle else 0.0
            if a.number >= 0 and (a.job_id, a.number) not in counted[key]:  # a volume is no attempt
                counted[key].add((a.job_id, a.number))
                row["attempts"] += 1
    out = sorted(rows.values(), key=lambda r: r["key"])
    for r in out:
        r["cost"], r["idle"] = round(r["cost"], 6), round(r["idle"], 6)
    return {"since": since, "until": now, "by": by, "total": round(sum(r["cost"] for r in out), 6),
            "idle": round(sum(r["idle"] for r in out), 6), "rows": out}
