"""The daemon's Prometheus endpoint. Only the daemon imports this package (and prometheus-client),
so the CLI starts fast.

Families (``docs/operations.md`` has the list with examples):

- from the store at scrape time (``store_collector``): ``gpuorch_jobs{state}``,
  ``gpuorch_attempts_total{reason}``, ``gpuorch_attempts_active{status}``,
  ``gpuorch_preemptions_total``, ``gpuorch_spend_usd_total{provider}``, ``gpuorch_store_up``;
- counted by the daemon: ``gpuorch_reconcile_pass_duration_seconds`` (histogram),
  ``gpuorch_reconcile_passes_total{outcome}``, and through ``InstrumentedProvider``
  ``gpuorch_provider_calls_total{provider,method}`` and
  ``gpuorch_provider_call_errors_total{provider,method,kind,code}``;
- from the notification outbox (``notify_collector``): ``gpuorch_notifications_delivered_total``,
  ``gpuorch_notification_failures_total``, ``gpuorch_notifications_dropped_total``,
  ``gpuorch_notifications_pending`` (each by ``route``) and ``gpuorch_notification_outbox_depth``;
- ``gpuorch_daemon_info{owner,version}`` and the standard ``process_*`` families.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, ProcessCollector, start_http_server

from gpuorch.clock import Clock
from gpuorch.metrics.instrument import InstrumentedProvider
from gpuorch.metrics.notify_collector import NotifyCollector
from gpuorch.metrics.store_collector import StoreCollector
from gpuorch.provider.port import Provider
from gpuorch.store import Store

log = logging.getLogger("gpuorch.metrics")

PASS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def _version() -> str:
    try:
        return version("gpuorch")
    except PackageNotFoundError:
        return "unknown"


class Metrics:
    """One registry per daemon (never the global one: several daemons may share a process in tests)."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pass_seconds = Histogram("gpuorch_reconcile_pass_duration_seconds", "Duration of reconcile passes.",
                                      buckets=PASS_BUCKETS, registry=r)
        self.passes = Counter("gpuorch_reconcile_passes", "Reconcile passes by outcome (ok, failed, abandoned).",
                              ["outcome"], registry=r)
        self.provider_calls = Counter("gpuorch_provider_calls", "Calls to provider adapters.",
                                      ["provider", "method"], registry=r)
        self.provider_errors = Counter("gpuorch_provider_call_errors",
                                       "Provider calls that raised, by error kind and the adapter's error code.",
                                       ["provider", "method", "kind", "code"], registry=r)
        self.info = Info("gpuorch_daemon", "The daemon serving these metrics.", registry=r)
        ProcessCollector(registry=r)
        r.register(StoreCollector(store, clock))
        r.register(NotifyCollector(store))  # notification deliveries (docs/notifications.md)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None

    def instrument(self, providers: Mapping[str, Provider]) -> dict[str, Provider]:
        calls, errors = self.provider_calls, self.provider_errors
        return {name: InstrumentedProvider(p, calls, errors) for name, p in providers.items()}

    def observe_pass(self, seconds: float | None, outcome: str) -> None:
        if seconds is not None:
            self.pass_seconds.observe(seconds)
        self.passes.labels(outcome).inc()

    def start(self, host: str, port: int, owner: str) -> str:
        """Serve ``/metrics`` on ``host:port`` (port 0: any free one); return its URL.

        Raises OSError when the address cannot be bound.
        """
        self.info.info({"owner": owner, "version": _version()})
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        bound_port = self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound_port}/metrics"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
