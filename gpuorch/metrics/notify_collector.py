"""Notification delivery metrics, read from the outbox in the store when Prometheus scrapes
(docs/notifications.md, "Delivery guarantees"; docs/operations.md lists every family).

- ``gpuorch_notifications_delivered_total{route}``: deliveries a receiver acknowledged;
- ``gpuorch_notification_failures_total{route}``: failed tries (4xx/5xx, timeouts, refusals),
  of deliveries since delivered, still retried or dropped;
- ``gpuorch_notifications_dropped_total{route}``: deliveries dropped after their last try;
- ``gpuorch_notifications_pending{route}``: deliveries waiting for their next try;
- ``gpuorch_notification_outbox_depth``: what is still to send: pending deliveries plus
  notifications not routed yet.

From the store, like ``store_collector``: right after a restart, and the same on every daemon
of an HA pair. Delivery rows are never deleted and their tries only grow, so the ``_total``
families only grow, as Prometheus counters must.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func
from sqlmodel import col, select

from gpuorch.notify.outbox import DEAD, DELIVERED, PENDING
from gpuorch.store import Store
from gpuorch.store.models import Notification, NotificationDelivery

log = logging.getLogger("gpuorch.metrics")


class NotifyCollector(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._read()
        except Exception as e:  # a scrape must answer; gpuorch_store_up says the store is unreadable
            log.warning("metrics: cannot read the notification outbox: %s", e)

    def _read(self) -> list[Metric]:
        d = NotificationDelivery
        with self.store.read() as s:
            rows = s.exec(select(col(d.route), col(d.status), func.count(), func.coalesce(func.sum(d.tries), 0))
                          .group_by(col(d.route), col(d.status))).all()
            unrouted = s.exec(select(func.count()).select_from(Notification)
                              .where(col(Notification.prepared).is_(False))).one()
        delivered = CounterMetricFamily("gpuorch_notifications_delivered",
                                        "Notification deliveries a receiver acknowledged, by route.", labels=["route"])
        failures = CounterMetricFamily("gpuorch_notification_failures",
                                       "Failed notification delivery tries, by route.", labels=["route"])
        dropped = CounterMetricFamily("gpuorch_notifications_dropped",
                                      "Notification deliveries dropped after their last try, by route.",
                                      labels=["route"])
        pending = GaugeMetricFamily("gpuorch_notifications_pending",
                                    "Notification deliveries waiting for their next try, by route.", labels=["route"])
        by_route: dict[str, dict[str, tuple[int, int]]] = {}
        for route, status, n, tries in rows:
            by_route.setdefault(route, {})[status] = (int(n), int(tries))
        waiting = 0
        for route, st in sorted(by_route.items()):
            ok, ok_tries = st.get(DELIVERED, (0, 0))
            dead, dead_tries = st.get(DEAD, (0, 0))
            waits, wait_tries = st.get(PENDING, (0, 0))
            delivered.add_metric([route], ok)
            failures.add_metric([route], (ok_tries - ok) + dead_tries + wait_tries)  # a delivery's last try succeeded
            dropped.add_metric([route], dead)
            pending.add_metric([route], waits)
            waiting += waits
        depth = GaugeMetricFamily("gpuorch_notification_outbox_depth",
                                  "Notifications still to send: pending deliveries plus rows not routed yet.")
        depth.add_metric([], waiting + int(unrouted))
        return [delivered, failures, dropped, pending, depth]
