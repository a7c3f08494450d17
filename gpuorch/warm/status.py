"""``gpuorch status``'s warm instances (spec ``keep_warm``): each open idle period, where it is,
which job left it warm, how long it has idled and what that cost so far, and until when it is kept.

Read with the stdlib ``sqlite3`` reader when ``status`` itself does (``store.lite``: no ORM import
on its cold start), else through the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuorch.money.cost import attempt_cost

OPEN_SQL = "SELECT * FROM warminstance WHERE ended_at IS NULL ORDER BY id"


@dataclass
class _Idle:
    """An idle period as billing reads it (``money.cost.Billed``), as ``ledger.idle_attempt`` bills
    it, without the ORM: ``status --json`` reads the store with the stdlib only."""

    launched_at: datetime | None
    ended_at: datetime | None
    price_per_hour: float
    billing_granularity_s: int
    min_billing_s: int = 0  # the launch paid the minimum
    price_changes: str | None = None


def summary(w: Any, now: datetime) -> dict[str, Any]:
    """One open idle period (a ``WarmInstance`` or a lite row with its attributes) for people and JSON."""
    idle = max(0.0, (now - w.idle_since).total_seconds())
    billed = _Idle(w.idle_since, w.ended_at, w.price_per_hour, w.billing_granularity_s)
    return {"instance_id": w.instance_id, "provider": w.provider, "zone": w.zone, "instance_type": w.instance_type,
            "spot": bool(w.spot), "status": w.status, "job_id": w.job_id, "idle_s": round(idle, 3),
            "idle_usd": round(attempt_cost(billed, now), 6), "price_per_hour": w.price_per_hour,
            "keep_until": w.keep_until.isoformat()}


def open_periods(service: Any, now: datetime) -> list[dict[str, Any]]:
    """The store's open idle periods, oldest first. ``service``: a ``gpuorch.jobs.service.JobService``
    (a layer above this one: typed by what is used, its ``_lite`` reader and its ``store``)."""
    with service._lite() as lite:
        if lite is not None:
            return [summary(w, now) for w in lite._rows("warminstance", OPEN_SQL)]
    from sqlmodel import col, select

    from gpuorch.store.models import WarmInstance

    with service.store.read() as s:
        rows = s.exec(select(WarmInstance).where(col(WarmInstance.ended_at).is_(None)).order_by(col(WarmInstance.id)))
        return [summary(w, now) for w in rows]
