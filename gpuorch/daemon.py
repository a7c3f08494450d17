"""The long-lived daemon: reconcile passes until told to stop.

The only sleep lives here, between passes, and it is interruptible: SIGTERM/SIGINT set an
event, the current pass finishes, leases are released, and jobs keep running in the cloud to be
re-adopted by the next daemon.
"""

from __future__ import annotations

import logging
import signal
import threading

from .config import DaemonConfig
from .logmirror import LogMirror
from .reconciler import Reconciler, Settings
from .registry import load_providers
from .store import Store

log = logging.getLogger("gpuorch.daemon")


def build_reconciler(config: DaemonConfig, store: Store | None = None) -> Reconciler:
    config.home.mkdir(parents=True, exist_ok=True)
    store = store or Store(config.url)
    providers = load_providers(config.providers, config.home)
    settings = Settings(poll_s=config.poll_s, recovery_strategy=config.recovery_strategy,
                        avoid_preempted_zone_s=config.avoid_preempted_zone_s,
                        heartbeat_timeout_s=config.heartbeat_timeout_s, max_lifetime_s=config.max_instance_lifetime_s)
    return Reconciler(store, providers, settings=settings, lease_s=config.lease_s, backoff_s=config.backoff_s,
                      logs=LogMirror(config.home))


def run(config: DaemonConfig, *, once: bool = False, stop: threading.Event | None = None) -> None:
    rec = build_reconciler(config)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    log.info("daemon %s started: providers %s, store %s", rec.owner, ", ".join(rec.providers), rec.store.url)
    try:
        while not stop.is_set():
            try:
                wait = rec.run_pass()
            except Exception:  # a bad pass must not kill the daemon; the next one starts afresh
                log.exception("reconcile pass failed")
                wait = config.poll_s
            if once:
                break
            stop.wait(min(max(wait, 0.05), config.max_sleep_s))
    finally:
        rec.release_leases()
        for p in rec.providers.values():
            p.close()
        rec.store.close()
        log.info("daemon %s stopped", rec.owner)
