"""What each dashboard page shows, loaded from the store: the same ``JobService`` answers as
``gpuorch status``/``sweep status``/``cost`` give, plus the series the charts need (metric
curves from the mirrored metrics lines, spend over time from the attempts' billing).
Read-only: nothing here writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.jobs.service import JobService
from gpuorch.money.cost import cost_between
from gpuorch.money.report import cost_report
from gpuorch.store.models import Attempt, Job

LOG_TAIL = 16 * 1024  # bytes of the newest attempt's output on a job page
MAX_POINTS = 240  # samples of a spend-over-time line
MAX_EVENTS = 200


def jobs(service: JobService) -> dict[str, Any]:
    """``cancelling``: the unfinished jobs whose cancel is already asked (their row shows it
    instead of a second Cancel button)."""
    with service.store.read() as s:
        asked = set(s.exec(select(Job.id).where(col(Job.cancel_requested).is_(True),
                                                col(Job.finished_at).is_(None))).all())
    from gpuorch.warm.status import open_periods  # the warm instances (spec keep_warm) and their idle cost

    return {"daemon": service.daemon(), "jobs": service.jobs(), "cancelling": asked,
            "warm": open_periods(service, service.now())}


def job(service: JobService, ref: str) -> dict[str, Any]:
    detail = service.job(ref)
    events = service.events(str(detail["id"]), MAX_EVENTS)
    tail = b""
    if detail["attempt_list"]:
        n = detail["attempt_list"][-1]["number"]
        path = service.mirror.path(detail["id"], n)
        size = path.stat().st_size if path.exists() else 0
        tail = service.read_log(detail["id"], n, max(0, size - LOG_TAIL), LOG_TAIL)
    return {"job": detail, "events": events, "log_tail": tail.decode("utf-8", errors="replace"),
            "daemon": service.daemon()}


def sweeps(service: JobService) -> dict[str, Any]:
    return {"sweeps": service.sweeps(), "daemon": service.daemon()}


def _spend_series(attempts: list[Attempt], now: datetime) -> list[tuple[float, float]]:
    """Cumulative USD billed by ``attempts`` over time, sampled at most ``MAX_POINTS`` times."""
    starts = [a.launched_at for a in attempts if a.launched_at is not None]
    if not starts:
        return []
    t0 = min(starts)
    span = max((now - t0).total_seconds(), 1.0)
    times = [t0 + timedelta(seconds=span * i / (MAX_POINTS - 1)) for i in range(MAX_POINTS)]
    return [(t.timestamp(), sum(cost_between(a, None, t, now) for a in attempts if a.launched_at is not None))
            for t in times]


def sweep(service: JobService, ref: str) -> dict[str, Any]:
    report = service.sweep(ref)
    now = service.now()
    metric = report["objective"]["metric"] if report["objective"] else None
    with service.store.read() as s:
        ids = [t["id"] for t in report["trials"]]
        attempts = list(s.exec(select(Attempt).where(col(Attempt.job_id).in_(ids)).order_by(col(Attempt.number))))
        ended = max([a.ended_at for a in attempts if a.ended_at is not None], default=None)
        live = any(a.ended_at is None and a.launched_at is not None for a in attempts)
        first = {j.id: j.created_at for j in s.exec(select(Job).where(col(Job.id).in_(ids)))}
    numbers: dict[int, list[int]] = {}
    for a in attempts:
        numbers.setdefault(a.job_id, []).append(a.number)
    curves = [(t["name"], service.mirror.metric_history(t["id"], numbers.get(t["id"], []), metric))
              for t in report["trials"]] if metric else []
    until = now if live or ended is None else ended  # a finished sweep's line stops where its spending did
    return {"sweep": report, "curves": curves, "spend": _spend_series(attempts, until), "daemon": service.daemon(),
            "created": min(first.values(), default=None)}


def costs(service: JobService, daily_cap: float | None, days: int = 14) -> dict[str, Any]:
    now = service.now()
    since = (now - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    with service.store.read() as s:
        by = {g: cost_report(s, since if g == "day" else None, now, g) for g in ("day", "provider", "sweep")}
    return {"by": by, "daily_cap": daily_cap, "days": days, "daemon": service.daemon()}


# ``notify.outbox.health``: deliveries by status, the number being retried, the newest dead ones
Health = Callable[[Session], dict[str, Any]]


def daemon(service: JobService, notify_health: Health | None = None) -> dict[str, Any]:
    health = None
    if notify_health is not None:
        with service.store.read() as s:
            health = notify_health(s)
    return {"daemon": service.daemon(), "notifications": health}
