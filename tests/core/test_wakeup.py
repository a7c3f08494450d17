"""A submit wakes a daemon sleeping on a long poll: the job is launched at once, not at the next poll.

A real ``Daemon`` serving a reconciler (FakeProvider, real SQLite, the store's FIFO signal) in a
thread, configured to sleep an hour between passes: only the signal can bring the job's launch.

Bare Reconciler: the FakeProvider (which the entry points cannot build) under a real Daemon; the
wake-up signal is what is under test.
"""

from __future__ import annotations

import threading

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.daemon import Daemon
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store import wake
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeProvider

SPEC = {"name": "woken", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}}
HOUR = 3600.0


def test_a_submit_wakes_a_daemon_that_would_sleep_an_hour(store):
    rec = Reconciler(store, {"fake": FakeProvider()}, settings=Settings(poll_s=HOUR, no_offer_retry_s=HOUR))
    daemon = Daemon(rec, DaemonConfig(poll_s=HOUR, max_sleep_s=HOUR, lease_s=3 * HOUR))
    assert daemon.listener is not None
    passed = threading.Event()
    run_pass = rec.run_pass

    def counted(stop=None):  # type: ignore[no-untyped-def]
        try:
            return run_pass(stop=stop)
        finally:
            passed.set()

    rec.run_pass = counted  # type: ignore[method-assign]
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        assert passed.wait(60)  # the first pass found nothing; the daemon now sleeps an hour
        passed.clear()
        job = jobs.submit(store, parse_spec(SPEC), utcnow())
        wake.notify(store)
        assert passed.wait(60)  # woken: a pass, long before the hour
        assert daemon.woken == 1
        assert len(attempts(store, job.id or 0)) == 1  # the job's launch was recorded by that pass
    finally:
        daemon.request_stop()
        serving.join(60)
    assert not serving.is_alive()
