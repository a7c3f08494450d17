"""The sender: drains the outbox at least once, on a thread the daemon starts beside its passes
(``gpuorch.ops.daemon``), so a slow receiver never holds a pass.

Each turn (``tick``) routes new notifications, then sends due deliveries one at a time, each
claimed with a lease first. The order per delivery is: claim (committed) -> send -> record.
A crash after the send and before the record leaves the lease to lapse, and the next daemon
sends again with the same ``webhook-id``: receivers see a notification at least once and
de-duplicate by that id. Failures are retried with exponential back-off up to ``max_tries``,
then the delivery is dead (logged, an event, ``gpuorch doctor``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime, time, timedelta
from hashlib import sha256
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from gpuorch.clock import utcnow
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.notify import outbox, payload
from gpuorch.notify.report import morning_report
from gpuorch.notify.routes import Route, SendFailed, build_routes
from gpuorch.ops.config import DaemonConfig, NotificationsConfig
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.store import Store
from gpuorch.store.models import Heartbeat, Notification, Sweep, SweepStatus

log = logging.getLogger("gpuorch.notify")
IDLE_S = 2.0  # the longest a turn waits for new rows (a notification waits at most this long)


class Sender:
    def __init__(self, store: Store, routes: list[Route], config: NotificationsConfig, owner: str, *,
                 home: Path | None = None, lease_s: float = 60.0, now: Callable[[], datetime] = utcnow) -> None:
        self.store, self.config, self.owner, self.lease_s, self.now = store, config, owner, lease_s, now
        self.routes = {r.name: r for r in routes}
        self.logs = LogMirror(home) if home is not None else None
        self.sent = 0  # deliveries acknowledged by this sender (tests and logs read it)

    def _build(self, s: Session, row: Notification) -> dict[str, Any]:
        return payload.build(s, row, installation=self.store.installation_id, logs=self.logs,
                             log_lines=self.config.log_lines, now=self.now())

    def tick(self, limit: int = 100) -> int:
        """Route what is new and send up to ``limit`` due deliveries; how many were tried."""
        self.report_if_due()
        while outbox.route_new(self.store, list(self.routes.values()), self._build, self.now()):
            pass
        tried = 0
        while tried < limit:
            claimed = outbox.claim(self.store, self.owner, self.routes, self.now(), self.lease_s)
            if claimed is None:
                break
            crashpoint("notify.claimed")
            self._send(claimed)
            tried += 1
        return tried

    def _send(self, c: outbox.Claimed) -> None:
        route = self.routes[c.route]
        try:
            route.channel.send(c.uid, c.body.encode(), json.loads(c.body))
        except SendFailed as e:
            self._failed(route, c, str(e))
            return
        except Exception as e:  # a bug in a channel or its library: a failed try, never a dead sender
            self._failed(route, c, route.redact(f"{type(e).__name__}: {e}"))
            return
        crashpoint("notify.sent")
        outbox.delivered(self.store, c, self.now())
        self.sent += 1
        log.info("notification %s delivered to %s (%s)", c.uid, route.name, route.shown,
                 extra={"notification": c.uid, "route": route.name})

    def _failed(self, route: Route, c: outbox.Claimed, error: str) -> None:
        dead = outbox.failed(self.store, c, self.now(), error, max_tries=self.config.max_tries,
                             first_s=self.config.backoff_s, max_s=self.config.max_backoff_s, shown=route.shown)
        how = "dropped after the last try" if dead else f"try {c.tries + 1} of {self.config.max_tries} failed"
        (log.error if dead else log.warning)("notification %s to %s (%s): %s: %s", c.uid, route.name, route.shown,
                                             how, error, extra={"notification": c.uid, "route": route.name})

    # -- notifications of the sender's own ------------------------------------------------------
    def _enqueue_once(self, uid: str, type_: str, message: str, data: dict[str, object]) -> bool:
        """Add a notification whose id says what it is about (so two daemons, or a restart, add it once)."""
        try:
            with self.store.write() as s:
                if s.exec(select(Notification).where(Notification.uid == uid)).first() is not None:
                    return False
                s.add(Notification(uid=uid, ts=self.now(), type=type_, message=message,
                                   data=json.dumps(data, default=str)))
        except IntegrityError:  # another daemon, between our look and our insert
            return False
        return True

    def report_if_due(self) -> None:
        """At ``report_at`` (this host's local time), one report of the sweeps ended in the day before."""
        if self.config.report_at is None:
            return
        hour, minute = (int(x) for x in self.config.report_at.split(":"))
        local = self.now().astimezone()
        at = datetime.combine(local.date(), time(hour, minute), tzinfo=local.tzinfo)
        if local < at:
            return
        uid = f"msg_report_{at:%Y%m%d}_{self.store.installation_id}"
        with self.store.read() as s:
            if s.exec(select(Notification.id).where(Notification.uid == uid)).first() is not None:
                return
            since = at - timedelta(days=1)
            ended = list(s.exec(select(Sweep).where(Sweep.status == SweepStatus.DONE,
                                                    col(Sweep.finished_at) >= since).order_by(col(Sweep.id))))
            report = morning_report(s, ended, self.now(), since=since)
        message = f"{len(ended)} sweep(s) ended since {since:%Y-%m-%d %H:%M}"
        if self._enqueue_once(uid, "report.morning", message, report):
            log.info("morning report queued: %s", message)

    def note_crashed_daemons(self) -> None:
        """A ``daemon.restarted`` notification for each daemon of this host that died without stopping."""
        host = socket.gethostname()
        with self.store.read() as s:
            rows = s.exec(select(Heartbeat).where(Heartbeat.host == host, col(Heartbeat.stopped_at).is_(None),
                                                  Heartbeat.owner != self.owner))
            gone = [h for h in rows if not _alive(h.pid)]
        for h in gone:
            uid = "msg_restart_" + sha256(h.owner.encode()).hexdigest()[:32]
            last = h.last_pass_at or h.started_at
            self._enqueue_once(uid, "daemon.restarted", f"daemon {h.owner} on {host} died without stopping (last pass "
                               f"{last:%Y-%m-%d %H:%M:%S} UTC); {self.owner} took over" if last else
                               f"daemon {h.owner} on {host} died without stopping; {self.owner} took over",
                               {"previous": h.owner, "pid": h.pid, "last_pass_at": last})

    # -- the thread --------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.note_crashed_daemons()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # a store hiccup: the rows stay, the next turn tries again
                log.exception("notification sender turn failed; retrying")
            stop.wait(IDLE_S if not self._due_soon() else 0.05)
        try:
            outbox.release(self.store, self.owner)
        except Exception:
            log.warning("could not release notification leases (they lapse by themselves)", exc_info=True)

    def _due_soon(self) -> bool:
        """A retry falls due before the next idle turn would start."""
        with self.store.read() as s:
            nxt = s.exec(select(outbox.NotificationDelivery.next_at).where(
                outbox.NotificationDelivery.status == outbox.PENDING,
                col(outbox.NotificationDelivery.route).in_(list(self.routes))).order_by(
                col(outbox.NotificationDelivery.next_at)).limit(1)).first()
        return nxt is not None and (nxt - self.now()).total_seconds() < IDLE_S

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="notify-sender", daemon=True)
        thread.start()
        return thread


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def from_config(config: DaemonConfig) -> Callable[[Store, str], Sender] | None:
    """The daemon's sender, once it has its store and owner; its routes are checked now, before
    the store is opened (UserInputError, one line naming the field and the fix). None: no routes."""
    if not config.notifications.enabled:
        return None
    routes = build_routes(config.notifications)
    for r in routes:
        log.info("notifications to %s: %s (%s)", r.name, r.shown, ", ".join(sorted(r.events)) if r.events else
                 "all events")
    return lambda store, owner: Sender(store, routes, config.notifications, owner, home=config.home,
                                       lease_s=config.lease_s)
