"""The job-row writes of one launching pass (``apply/batch_txn.py``: a batch writes each held job
row once at most), shared by the SQLite test (tests/core) and the PostgreSQL one (tests/ha).

Bare Reconciler: the FakeProvider and a fake clock make the pass exact; what is counted is the
store's statements, which the assembled daemon would only add to (its heartbeat, its claim).
"""

from __future__ import annotations

import threading
from datetime import datetime

from sqlalchemy import event
from sqlmodel import select

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Job
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def launching_pass(store: Store, clock: FakeClock, queued: int) -> tuple[list[str], list[Job], list[Attempt], datetime]:
    """Submit ``queued`` jobs, move the clock on, run one pass: the ``UPDATE job`` statements it
    made other than the claim's (which sets the leases), the job and attempt rows after it, and
    the pass's time."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i in range(queued):
        jobs.submit(store, parse_spec({**SPEC, "name": f"w{i}"}), clock.now())
    at = clock.advance(10)
    seen: list[str] = []
    lock = threading.Lock()  # the launch pool's threads write too

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        text = " ".join(statement.split())
        if text.upper().startswith("UPDATE JOB ") and "lease_" not in text:
            with lock:
                seen.append(text)

    engine = store._write  # the engine every write goes through (SQLite: the writer's own)
    event.listen(engine, "before_cursor_execute", record)
    try:
        rec.run_pass()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    with store.read() as s:
        return seen, list(s.exec(select(Job).order_by(Job.id))), list(s.exec(select(Attempt))), at  # type: ignore[arg-type]
