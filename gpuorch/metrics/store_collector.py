"""Job and money metrics, read from the state store when Prometheus scrapes.

Computed from the store rather than counted in the daemon, so they are right after a restart
and cover jobs another daemon handled. Attempt rows are never deleted and a running attempt's
cost only grows, so the ``_total`` families are monotonic as Prometheus counters must be.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func
from sqlmodel import select

from gpuorch.clock import Clock, SystemClock
from gpuorch.money.cost import attempt_cost
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason

log = logging.getLogger("gpuorch.metrics")


class StoreCollector(Collector):
    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store, self.clock = store, clock or SystemClock()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("gpuorch_store_up", "1 if the last scrape could read the state store.")
        try:
            families = self._read()
        except Exception as e:  # a scrape must answer even when the database does not
            log.warning("metrics: cannot read the state store: %s", e)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _read(self) -> list[Metric]:
        now = self.clock.now()
        with self.store.read() as s:
            by_state = dict(s.exec(select(Job.status, func.count()).group_by(Job.status)).all())
            preemptions = s.exec(select(func.coalesce(func.sum(Job.preemptions), 0))).one()
            attempts = list(s.exec(select(Attempt)))
        jobs = GaugeMetricFamily("gpuorch_jobs", "Jobs by state.", labels=["state"])
        for state in JobStatus:
            jobs.add_metric([state.value], by_state.get(state, 0))
        ended = Tally(a.reason.value for a in attempts if a.status == AttemptStatus.ENDED and a.reason)
        ended_f = CounterMetricFamily("gpuorch_attempts", "Ended attempts by termination reason.", labels=["reason"])
        for reason in TerminationReason:
            ended_f.add_metric([reason.value], ended.get(reason.value, 0))
        live = Tally(a.status.value for a in attempts if a.status != AttemptStatus.ENDED)
        live_f = GaugeMetricFamily("gpuorch_attempts_active", "Attempts not ended yet, by status.", labels=["status"])
        for status in AttemptStatus:
            if status != AttemptStatus.ENDED:
                live_f.add_metric([status.value], live.get(status.value, 0))
        pre = CounterMetricFamily("gpuorch_preemptions", "Preemptions of all jobs (with or without notice).")
        pre.add_metric([], int(preemptions))
        spend: dict[str, float] = defaultdict(float)
        for a in attempts:
            spend[a.provider] += attempt_cost(a, now)
        spend_f = CounterMetricFamily("gpuorch_spend_usd", "Money spent on instances (billed so far), by provider.",
                                      labels=["provider"])
        for provider, usd in sorted(spend.items()):
            spend_f.add_metric([provider], usd)
        return [jobs, ended_f, live_f, pre, spend_f]
