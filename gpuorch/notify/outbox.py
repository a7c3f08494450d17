"""The outbox in the store: route new notifications (fix their body, one delivery row per route
that wants them), claim a due delivery with a lease (two daemons never send it at once; a dead
daemon's lease lapses), and record each try's outcome: delivered, or retried with exponential
back-off, or dead after ``max_tries`` (an event ``notification_dead``, and ``gpuorch doctor``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, func, select

from gpuorch.jobs import events
from gpuorch.notify.routes import Route
from gpuorch.store import Store
from gpuorch.store.models import Job, Notification, NotificationDelivery, Sweep

BATCH = 50  # notifications routed per transaction

PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"


@dataclass(frozen=True)
class Claimed:
    delivery_id: int
    route: str
    uid: str
    body: str
    tries: int


def _names(s: Session, row: Notification) -> tuple[str | None, str | None]:
    """The job's and sweep's names, which routes' ``jobs:`` and ``sweeps:`` match."""
    job = s.get(Job, row.job_id) if row.job_id is not None else None
    sweep = s.get(Sweep, job.sweep_id) if job is not None and job.sweep_id is not None else None
    if row.type == "sweep.finished":
        return None, row.message.removeprefix("sweep ").rsplit(" done: ", 1)[0]
    return (job.name if job else None), (sweep.name if sweep else None)


def route_new(store: Store, routes: list[Route], build: Callable[[Session, Notification], dict[str, Any]],
              now: datetime) -> int:
    """Fix the body of each unrouted notification and add a delivery for each route that wants it
    (none: routed, nothing to send). The body is built on a read; the write re-checks ``prepared``
    and the (notification, route) key is unique, so two daemons routing at once add nothing twice."""
    with store.read() as s:
        rows = list(s.exec(select(Notification).where(col(Notification.prepared).is_(False))
                           .order_by(col(Notification.id)).limit(BATCH)))
        plans = []
        for row in rows:
            job, sweep = _names(s, row)
            doc = build(s, row)
            plans.append((row.id, json.dumps(doc, separators=(",", ":"), default=str),
                          [r.name for r in routes if r.wants(row.type, job, sweep)]))
    if not plans:
        return 0
    with store.write() as s:
        for nid, body, names in plans:
            fresh = s.get(Notification, nid)
            if fresh is None or fresh.prepared:
                continue
            fresh.prepared, fresh.body = True, body
            for name in names:
                s.add(NotificationDelivery(notification_id=nid, route=name, next_at=now))  # type: ignore[arg-type]
    return len(plans)


def claim(store: Store, owner: str, routes: dict[str, Route], now: datetime, lease_s: float) -> Claimed | None:
    """The oldest due delivery of a configured route, leased to ``owner`` until it is sent (one at a
    time: the lease covers one send). A route no longer configured keeps its rows pending."""
    free = or_(col(NotificationDelivery.lease_expires).is_(None), col(NotificationDelivery.lease_expires) <= now)
    q = (select(NotificationDelivery, Notification)
         .join(Notification, col(Notification.id) == col(NotificationDelivery.notification_id))
         .where(NotificationDelivery.status == PENDING, col(NotificationDelivery.next_at) <= now, free,
                col(NotificationDelivery.route).in_(list(routes)))
         .order_by(col(NotificationDelivery.next_at), col(NotificationDelivery.id)).limit(1))
    with store.write() as s:
        found = s.exec(q).first()
        if found is None:
            return None
        d, n = found
        d.lease_owner = owner
        d.lease_expires = now + timedelta(seconds=lease_s + routes[d.route].timeout_s)
        return Claimed(d.id or 0, d.route, n.uid, n.body or "{}", d.tries)


def delivered(store: Store, c: Claimed, now: datetime) -> None:
    with store.write() as s:
        d = s.get(NotificationDelivery, c.delivery_id)
        if d is not None and d.status == PENDING:
            d.status, d.delivered_at, d.tries = DELIVERED, now, d.tries + 1
            d.lease_owner, d.lease_expires, d.last_error = None, None, None


def backoff_s(tries: int, first_s: float, max_s: float) -> float:
    """The wait after the ``tries``-th failure: first_s, 2 first_s, 4 first_s, ... at most max_s."""
    return min(max_s, first_s * 2.0 ** min(tries - 1, 60))


def failed(store: Store, c: Claimed, now: datetime, error: str, *, max_tries: int, first_s: float,
           max_s: float, shown: str) -> bool:
    """Record a failed try: retried after the back-off, or dead after ``max_tries`` (an event says
    so, in the same transaction). True if it is dead."""
    with store.write() as s:
        d = s.get(NotificationDelivery, c.delivery_id)
        if d is None or d.status != PENDING:
            return False
        d.tries += 1
        d.last_error = error[:500]
        d.lease_owner, d.lease_expires = None, None
        if d.tries >= max_tries:
            d.status = DEAD
            events.record(s, now, "notification_dead", f"notification {c.uid} to {c.route} ({shown}) dropped after "
                          f"{d.tries} tries; last: {d.last_error}", route=c.route, uid=c.uid)
            return True
        d.next_at = now + timedelta(seconds=backoff_s(d.tries, first_s, max_s))
        return False


def release(store: Store, owner: str) -> None:
    """Hand back this owner's leases (a clean stop): another daemon sends them at once."""
    with store.write() as s:
        for d in s.exec(select(NotificationDelivery).where(NotificationDelivery.lease_owner == owner)):
            d.lease_owner, d.lease_expires = None, None


def health(s: Session) -> dict[str, Any]:
    """Counts by status and the dead deliveries, newest first (``gpuorch doctor``, the dashboard)."""
    counts = dict(s.exec(select(col(NotificationDelivery.status), func.count())
                         .group_by(col(NotificationDelivery.status))).all())
    dead = s.exec(select(NotificationDelivery, Notification)
                  .join(Notification, col(Notification.id) == col(NotificationDelivery.notification_id))
                  .where(NotificationDelivery.status == DEAD).order_by(col(NotificationDelivery.id).desc()).limit(20))
    failing = s.exec(select(func.count()).select_from(NotificationDelivery).where(
        NotificationDelivery.status == PENDING, col(NotificationDelivery.tries) > 0)).one()
    return {"counts": counts, "retrying": failing,
            "dead": [{"uid": n.uid, "type": n.type, "route": d.route, "tries": d.tries, "error": d.last_error}
                     for d, n in dead]}
