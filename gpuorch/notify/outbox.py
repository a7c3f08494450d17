"""The outbox in the store: route new notifications (fix their body, one delivery row per route
that wants them), claim a due delivery with a lease (two daemons never send it at once; a dead
daemon's lease lapses), and record each try's outcome: delivered, or retried with exponential
back-off, or dead after ``max_tries`` (an event ``notification_dead``, and ``gpuorch doctor``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, func, select

from gpuorch.jobs import events
from gpuorch.notify.payload import sweep_id_of
from gpuorch.notify.routes import Route
from gpuorch.store import Store
from gpuorch.store.models import Job, Notification, NotificationDelivery, Sweep

log = logging.getLogger("gpuorch.notify")
BATCH = 50  # notifications routed per transaction
REPEAT_S = 3600.0  # provider.credentials_failed: at most one per provider in this long (the launch back-off)

PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"


@dataclass(frozen=True)
class Claimed:
    delivery_id: int
    route: str
    uid: str
    body: str
    tries: int


@dataclass(frozen=True)
class Subject:
    """What routing needs of a notification's job or sweep: their names (routes' ``jobs:`` and
    ``sweeps:``) and their specs' ``notify:`` (routes added, types silenced), the sweep's and the
    trial's together."""

    job: str | None = None
    sweep: str | None = None
    added: frozenset[str] = frozenset()
    silenced: frozenset[str] = frozenset()

    def routes(self, routes: list[Route], type_: str) -> list[str]:
        if "all" in self.silenced or type_ in self.silenced:
            return []
        return [r.name for r in routes if r.wants(type_, self.job, self.sweep, added=r.name in self.added)]


def _notify_of(spec: str | None) -> tuple[list[str], list[str]]:
    """``notify:`` of a stored job or sweep spec (JSON): (routes, silence); none: empty. Read as
    JSON, not through the spec models: routing must not fail on a spec a newer version wrote."""
    try:
        got = (json.loads(spec) if spec else {}).get("notify") or {}
    except (ValueError, AttributeError):
        return [], []
    if not isinstance(got, dict):
        return [], []
    return [x for x in got.get("routes") or [] if isinstance(x, str)], \
        [x for x in got.get("silence") or [] if isinstance(x, str)]


def subject(s: Session, row: Notification) -> Subject:
    job = s.get(Job, row.job_id) if row.job_id is not None else None
    sid = job.sweep_id if job is not None else sweep_id_of(row)
    sweep = s.get(Sweep, sid) if sid is not None else None
    if sweep is None and row.type == "sweep.finished":  # an event stored before it carried the sweep's id
        name = row.message.removeprefix("sweep ").rsplit(" done: ", 1)[0]
        sweep = s.exec(select(Sweep).where(Sweep.name == name).order_by(col(Sweep.id).desc())).first()
    added: set[str] = set()
    silenced: set[str] = set()
    for spec in (job.spec if job else None, sweep.spec if sweep else None):
        routes, silence = _notify_of(spec)
        added.update(routes)
        silenced.update(silence)
    return Subject(job.name if job else None, sweep.name if sweep else None, frozenset(added), frozenset(silenced))


def _told_lately(s: Session, row: Notification) -> bool:
    """A provider's credentials failing is told once per ``REPEAT_S`` and provider: the launches of
    several jobs can fail on the same refused key within one pass (each records the event)."""
    if row.type != "provider.credentials_failed":
        return False
    provider = json.loads(row.data or "{}").get("provider")
    earlier = s.exec(select(Notification.data).where(
        Notification.type == row.type, col(Notification.id) < (row.id or 0),
        col(Notification.ts) > row.ts - timedelta(seconds=REPEAT_S), col(Notification.ts) <= row.ts)).all()
    return any(json.loads(d or "{}").get("provider") == provider for d in earlier)


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
            about = Subject(silenced=frozenset({"all"})) if _told_lately(s, row) else subject(s, row)
            unknown = about.added - {r.name for r in routes}
            if unknown:
                log.warning("notification %s: notify.routes names %s, which no route of this daemon has "
                            "(notifications.*[].name); not sent there", row.uid, ", ".join(sorted(unknown)))
            doc = build(s, row)
            plans.append((row.id, json.dumps(doc, separators=(",", ":"), default=str), about.routes(routes, row.type)))
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
