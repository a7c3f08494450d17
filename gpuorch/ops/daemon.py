"""The long-lived daemon: reconcile passes until told to stop.

Each pass runs on a worker thread while the main thread waits on a self-pipe, which the pass
(when done) and the SIGTERM/SIGINT handler (no locks, one ``os.write``) both write to. So a
stop request is seen at once, even mid-pass:

1. the daemon tells systemd ``STOPPING=1`` and sets the stop event: the pass claims no more
   jobs and ends after the job in hand;
2. it waits up to ``drain_timeout_s`` for that pass, then gives up on it (its writes are fenced
   by the leases, its launches are idempotent by client token);
3. it releases its leases, so a restarted (or another) daemon takes the jobs over at once.

Jobs keep running in the cloud (and, for the local provider, on this host) and are re-adopted
by the next daemon. A launch still out on the reconciler's launch pool is left behind: its
attempt was recorded first, so the next daemon repeats the call with the same client token.
Between passes the daemon sleeps until the next pass is due (at most ``max_sleep_s`` and, under
a systemd watchdog, at most half of ``WatchdogSec``), or until the store's change signal wakes it
(``store.wake``: a submit; PostgreSQL ``LISTEN``, a FIFO beside a SQLite database), so a submitted
job is launched at once without polling faster. It pings the watchdog only after a pass that
completed, so a wedged or failing daemon is restarted by systemd.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from gpuorch import __version__
from gpuorch.clock import utcnow
from gpuorch.errors import UserInputError
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.heap import HeapFreeze
from gpuorch.ops.presence import Presence
from gpuorch.ops.sdnotify import Notifier
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.reconciler.reconciler import DISK_FULL
from gpuorch.registry import load_providers
from gpuorch.store import Store, wake
from gpuorch.store.heartbeat import Beater
from gpuorch.store.slots import bind_slot_ledgers

if TYPE_CHECKING:  # the API is an optional extra: imported at run time only when enabled
    from gpuorch.api.server import ApiThread

log = logging.getLogger("gpuorch.daemon")
RELISTEN_S = 60.0  # a broken wake-up listener is opened again after this long (polling meanwhile)
# Allocations between two young collections of the cyclic GC (CPython's default: 700). A pass
# allocates millions of short-lived objects (rows, views, decisions) that reference counting
# frees; collecting every 700 walked the survivors again and again and set off the older
# generations' walks: 0.9 of a 10,000-job queue drain's 13.4 CPU-s, 0.2 at 50,000 (a few MB of
# cyclic garbage waits at most; what a pass leaves alive is frozen after it, ops/heap.py).
YOUNG_GC_THRESHOLD = 50_000


def build_reconciler(config: DaemonConfig, store: Store | None = None, metrics: Any = None) -> Reconciler:
    """The reconciler for ``config``; with ``metrics`` (a ``gpuorch.metrics.Metrics``) every
    provider is wrapped so its calls and errors are counted. ``catalog_files`` are read first
    (UserInputError, one line, for a file or, under ``catalog_strict``, a row that is refused)."""
    from gpuorch.provider.pricelists import price_lists

    lists, notes = (price_lists(config.catalog_files, config.providers, strict=config.catalog_strict)
                    if config.catalog_files else ({}, []))
    for line in notes:
        log.warning("%s", line)
    config.home.mkdir(parents=True, exist_ok=True)
    store = store or Store(config.url)
    providers = load_providers(config.providers, config.home)
    bind_slot_ledgers(providers, store)  # owned hosts' GPU slots leased in the store (SSH node pools)
    if metrics is not None:
        providers = metrics.instrument(providers)
    settings = Settings(poll_s=config.poll_s, recovery_strategy=config.recovery_strategy,
                        avoid_preempted_zone_s=config.avoid_preempted_zone_s,
                        heartbeat_timeout_s=config.heartbeat_timeout_s, max_lifetime_s=config.max_instance_lifetime_s)
    rec = Reconciler(store, providers, settings=settings, lease_s=config.lease_s, backoff_s=config.backoff_s,
                     logs=LogMirror(config.home), budget=config.budget_policy(), home=config.home)
    rec.offers.price_lists = lists  # these providers are priced from the user's files
    return rec


def assemble(config: DaemonConfig) -> tuple[Store, Any, Reconciler]:
    """The store, the metrics (None when ``metrics.enabled`` is off) and the reconciler that
    ``gpuorch daemon`` serves for ``config``: every wrapper on. ``gpuorch.testing.daemon`` builds
    its reconciler here too, so the tests run what users run."""
    store = Store(config.url)
    metrics = None
    if config.metrics.enabled:
        from gpuorch.metrics import Metrics  # prometheus-client: only the daemon imports it

        metrics = Metrics(store)
    try:
        return store, metrics, build_reconciler(config, store, metrics)
    except Exception:
        store.close()
        raise


def _start_api(config: DaemonConfig, store: Store) -> ApiThread:
    """The HTTP API in a thread of this process (``api.enabled``), on the daemon's own store."""
    try:
        from gpuorch.api.server import ApiThread
    except ImportError as e:
        raise UserInputError(f"api.enabled: the HTTP API needs FastAPI and uvicorn ({e.name} is not installed); "
                             "pip install 'gpuorch[server]'") from None
    return ApiThread(config, store).start()


class Daemon:
    """Serves one reconciler. ``request_stop`` may be called from a signal handler or any thread."""

    def __init__(self, rec: Reconciler, config: DaemonConfig, *, notifier: Notifier | None = None,
                 metrics: Any = None) -> None:
        self.rec, self.config = rec, config
        self.notifier = notifier or Notifier(None)
        self.metrics = metrics
        self.beater = Beater(rec.store, rec.owner, config.max_sleep_s, __version__)  # "is anything running?"
        self.stop = threading.Event()  # seen by the pass; set by the main thread only
        self._stopping = False  # set by request_stop, which must not take locks
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self.listener = wake.listen(rec.store)  # None: no signal on this store; the poll finds new jobs
        self._listen_at = time.monotonic() + RELISTEN_S  # when to try again if there is none
        self.woken = 0  # passes started early by the store's signal (tests read it)
        self.heap = HeapFreeze()  # what a pass leaves alive is frozen out of the cyclic GC's walks
        self._gc_threshold: tuple[int, ...] | None = None  # the collector's before serve (close restores it)
        self.sender: threading.Thread | None = None  # the notifications outbox's sender (gpuorch.notify)
        self.presence = Presence.hold(config.home, rec.owner)  # says to a later daemon whether this one died

    def request_stop(self, *_: object) -> None:
        self._stopping = True
        self._poke()

    def _poke(self) -> None:
        try:
            os.write(self._w, b".")
        except OSError:  # pipe full (already poked) or closed (already stopped)
            pass

    def _beat(self, step: str, *args: str) -> None:
        try:
            getattr(self.beater, step)(utcnow(), *args)
        except Exception:  # the heartbeat is for readers; a store hiccup must not stop the daemon
            log.warning("could not write the daemon heartbeat (%s)", step, exc_info=True)

    def _expire_the_gone(self) -> None:
        """Expire the leases of every daemon of this home that died on this host (``ops.presence``):
        its jobs are taken over at the first pass, not ``lease_s`` after its last renewal."""
        if self.presence is None:
            return
        for gone in self.presence.gone():
            try:
                n = self.rec.leases.expire_of(gone.owner, self.rec.clock.now())
            except Exception:  # its leases still expire on their own
                log.warning("could not expire the leases of daemon %s, which is gone", gone.owner, exc_info=True)
                os.close(gone.fd)
                continue
            gone.forget()
            log.warning("daemon %s is gone (its lock on this host is free): its %d job lease%s end now, not "
                        "lease_s after its last renewal", gone.owner, n, "" if n == 1 else "s",
                        extra={"gone": gone.owner, "leases": n})

    def _wait(self, timeout: float | None, wake_on_store: bool = False) -> bool:
        """Until poked or ``timeout`` (with ``wake_on_store``: or the store's signal); then act on
        a stop request. True if the store's signal ended the wait. Only the sleep between passes
        listens to the store: a signal that comes during a pass stays pending and ends the next
        sleep at once (the pass may have claimed before the submit committed)."""
        fds: list[Any] = [self._r]
        if wake_on_store:
            if self.listener is None and time.monotonic() >= self._listen_at:
                self._listen_at = time.monotonic() + RELISTEN_S
                self.listener = wake.listen(self.rec.store)
            if self.listener is not None:
                fds.append(self.listener)
        readable, _, _ = select.select(fds, [], [], timeout)
        woken = False
        if self.listener is not None and self.listener in readable:
            woken = True
            if not self.listener.drain():
                self.listener.close()
                self.listener = None
        if self._r in readable:
            try:
                while os.read(self._r, 512):
                    pass
            except BlockingIOError:
                pass
        if self._stopping and not self.stop.is_set():
            self.stop.set()
            log.info("stopping: no more jobs are claimed; the pass in flight gets %.0fs", self.config.drain_timeout_s)
            self.notifier.stopping("draining")
        return woken

    def _pass(self) -> tuple[str, float | None]:
        """One pass on a worker thread: ("ok" | "failed" | "abandoned", seconds until the next)."""
        done = threading.Event()
        result: dict[str, Any] = {}

        def work() -> None:
            start = time.monotonic()
            try:
                result["wait"] = self.rec.run_pass(stop=self.stop)
            except Exception as e:  # a bad pass must not kill the daemon; the next one starts afresh
                if not DISK_FULL.report(e, "reconcile pass"):
                    log.exception("reconcile pass failed")
            finally:
                result["seconds"] = time.monotonic() - start
                done.set()
                self._poke()

        threading.Thread(target=work, name="reconcile-pass", daemon=True).start()
        while not done.is_set() and not self._stopping:
            self._wait(None)
        deadline = time.monotonic() + self.config.drain_timeout_s
        while not done.is_set() and (left := deadline - time.monotonic()) > 0:
            self._wait(left)
        self._wait(0)  # note a stop requested during the pass
        if not done.is_set():
            log.warning("the pass in flight did not finish within %.0fs; leaving it (its writes are fenced "
                        "by the leases released now)", self.config.drain_timeout_s)
            outcome = "abandoned"
        else:
            outcome = "ok" if "wait" in result else "failed"
        if self.metrics is not None:
            self.metrics.observe_pass(result.get("seconds"), outcome)
        log.debug("pass %s in %.3f s", outcome, result.get("seconds") or 0.0)  # bench/queue_drain.py reads these
        return outcome, result.get("wait")

    def serve(self, *, once: bool = False) -> None:
        """Run passes until ``request_stop`` (or one pass with ``once``), then release the leases."""
        self.notifier.ready(f"reconciling with {', '.join(self.rec.providers) or 'no providers'}")
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(max(YOUNG_GC_THRESHOLD, self._gc_threshold[0]), *self._gc_threshold[1:])
        self._beat("started")
        self._expire_the_gone()
        if not once and self.config.catalog_refresh_s is not None:  # live prices, off the passes
            from gpuorch.ops.catalog_refresh import CatalogRefresher

            CatalogRefresher(self.rec.providers, self.config.home, self.config.catalog_refresh_s,
                             self.rec.clock.now, self.rec.offers.alarm).start(self.stop)
        try:
            while not self._stopping:
                outcome, wait = self._pass()
                if outcome != "abandoned":  # an abandoned pass's thread still runs: nothing to freeze for it
                    self.heap.after_pass()
                self._beat("passed", outcome)
                if outcome == "ok":
                    self.notifier.watchdog()
                if once or self._stopping:
                    break
                sleep = min(max(wait if wait is not None else self.config.poll_s, 0.05), self.config.max_sleep_s)
                if self.notifier.watchdog_s is not None:
                    sleep = min(sleep, self.notifier.watchdog_s)
                until = time.monotonic() + sleep  # a late poke from the last pass may cut a wait short
                while not self._stopping and (left := until - time.monotonic()) > 0:
                    if self._wait(left, wake_on_store=True):
                        self.woken += 1
                        break
        finally:
            self._wait(0)
            self.stop.set()
            self.close()

    def close(self) -> None:
        self.heap.close()
        if self._gc_threshold is not None:  # a daemon run inside a longer-lived process (the tests)
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
        if self.sender is not None:  # it saw self.stop: its send in flight gets the drain time, then the store closes
            self.sender.join(self.config.drain_timeout_s)
        released = False
        try:
            self.rec.release_leases()
            released = True
            log.info("leases released; running jobs are left to the next daemon")
        except Exception:
            log.exception("could not release leases (they expire after lease_s)")
        self._beat("stopped")
        if self.presence is not None and released:  # else the next daemon finds it gone, and expires them
            self.presence.close()
        if self.metrics is not None:
            self.metrics.stop()
        self.rec.pool.close()  # a launch still out is left behind: idempotent by client token
        self.rec.reads.close()
        for p in self.rec.providers.values():
            p.close()
        if self.listener is not None:
            self.listener.close()
        self.rec.store.close()
        os.close(self._r)
        os.close(self._w)
        log.info("daemon %s stopped", self.rec.owner)


def run(config: DaemonConfig, *, once: bool = False, stop: threading.Event | None = None) -> None:
    """Build the daemon for ``config`` and serve until SIGTERM/SIGINT, ``stop`` (for a daemon
    run in a thread) or one pass with ``once``.

    Raises UserInputError (before READY) for a configuration that cannot work.
    """
    notifier = Notifier.from_env(unset=True)  # the local provider's jobs must not inherit the socket
    from gpuorch.notify.sender import from_config as notify_sender

    make_sender = notify_sender(config)  # routes checked first: a bad URL or key stops the start in one line
    store, metrics, rec = assemble(config)
    sender = make_sender(store, rec.owner) if make_sender is not None else None
    if metrics is not None:
        try:
            url = metrics.start(config.metrics.host, config.metrics.port, rec.owner)
            log.info("metrics on %s", url, extra={"metrics_url": url})
        except OSError as e:
            log.error("metrics: cannot listen on %s:%s (%s); serving without metrics, fix metrics.port",
                      config.metrics.host, config.metrics.port, e)
    api = _start_api(config, store) if config.api.enabled and not once else None
    daemon = Daemon(rec, config, notifier=notifier, metrics=metrics)
    if sender is not None and not once:
        daemon.sender = sender.start(daemon.stop)  # beside the passes: a slow receiver never holds one
    if stop is not None:
        def watch_stop() -> None:
            stop.wait()
            daemon.request_stop()

        threading.Thread(target=watch_stop, name="stop-watch", daemon=True).start()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, daemon.request_stop)
    log.info("daemon %s started: providers %s, store %s", rec.owner, ", ".join(rec.providers), _safe_url(store.url),
             extra={"owner": rec.owner})
    try:
        daemon.serve(once=once)
    finally:
        if api is not None:
            api.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _safe_url(url: str) -> str:
    """The database URL without its password, for logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]
