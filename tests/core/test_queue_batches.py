"""A long queue drains in bounded batches: each pass launches at most ``Settings.launch_batch``
queued jobs, and only while the pass is younger than ``Settings.launch_budget_s``, and asks to
run again at once; it still looks at every running job (a notice is handled in a pass that leaves
queued jobs for the next). A batch's intents are one write transaction (the lease check of every
job in its ``SELECT``), its launches a few more, and a job whose lease is lost meanwhile is left
out of it. Real SQLite, FakeProvider, fake clock; statements counted by a SQLAlchemy listener."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event, update
from sqlmodel import col, select

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def statuses(store) -> list[JobStatus]:  # type: ignore[no-untyped-def]
    with store.read() as s:
        return [j.status for j in s.exec(select(Job).order_by(Job.id))]  # type: ignore[arg-type]


def drain(store, clock, settings: Settings, queued: int, passes: int) -> tuple[list[float], list[int]]:  # type: ignore[no-untyped-def]
    """Submit ``queued`` jobs, run ``passes`` passes: each pass's wait, and the jobs launched by then."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=settings)
    for i in range(queued):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    waits, launched = [], []
    for _ in range(passes):
        waits.append(rec.run_pass())
        launched.append(sum(s != JobStatus.QUEUED for s in statuses(store)))
    return waits, launched


def test_a_queue_drains_in_batches_and_each_pass_asks_for_the_next_at_once(store, clock):
    waits, launched = drain(store, clock, Settings(launch_batch=3), queued=7, passes=3)
    assert launched == [3, 6, 7]
    assert waits[0] == 0 and waits[1] == 0 and waits[2] > 0
    assert statuses(store)[:3] != [JobStatus.QUEUED] * 3  # in claim order: the oldest first


def test_a_notice_is_handled_in_a_pass_that_leaves_queued_jobs_for_the_next(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=1))
    first = jobs.submit(store, parse_spec({**SPEC, "name": "running"}), clock.now()).id
    for _ in range(4):
        rec.run_pass()
        clock.advance(2)
    assert statuses(store) == [JobStatus.RUNNING]
    for i in range(3):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == first)).one().instance_id
    fake.inject_preemption(inst, 120.0)
    rec.run_pass()
    with store.read() as s:
        drained = s.exec(select(Attempt).where(Attempt.job_id == first, Attempt.number == 1)).one()
    assert drained.status == AttemptStatus.DRAINING  # the notice, in this very pass
    assert statuses(store).count(JobStatus.QUEUED) == 2  # one queued job launched; two wait a pass


@contextmanager
def write_transactions(store) -> Iterator[list[str]]:  # type: ignore[no-untyped-def]
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.strip().upper() == "BEGIN IMMEDIATE":
            seen.append(statement)

    event.listen(store._write, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(store._write, "before_cursor_execute", record)


def test_a_pass_records_a_batch_of_launches_in_a_few_write_transactions(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i in range(60):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    with write_transactions(store) as begins:
        rec.run_pass()
    with store.read() as s:
        rows = list(s.exec(select(Attempt)))
    assert len(rows) == 60 and {r.status for r in rows} == {AttemptStatus.LAUNCHED}
    assert len({r.job_id for r in rows}) == 60 and fake.count("launch") == 60  # one instance each
    # the claim, the 60 intents, the 60 launches in shares of 25 per pool worker: 1 + 1 + 3 (was
    # 2 a job: 120), whatever the number of jobs up to Applier's LAUNCH_BATCH
    assert len(begins) <= 6


def test_a_job_whose_lease_is_lost_is_left_out_of_the_batch_and_the_others_launch(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now()).id for i in range(5)]
    batch = rec.applier.launching._txn_many
    assert batch is not None

    def taken_over_first(job_ids):  # type: ignore[no-untyped-def]
        with store.write() as s:  # another daemon took job 3 over after this pass's claim
            s.exec(update(Job).where(col(Job.id) == ids[2]).values(lease_owner="d2"))  # type: ignore[call-overload]
        return batch(job_ids)

    rec.applier.launching._txn_many = taken_over_first
    rec.run_pass()
    with store.read() as s:
        launched = {r.job_id for r in s.exec(select(Attempt))}
        job3 = s.get(Job, ids[2])
    assert launched == set(ids) - {ids[2]}  # nothing recorded, nothing launched for it
    assert fake.count("launch") == 4 and job3 is not None and job3.status == JobStatus.QUEUED


def test_a_pass_stops_launching_once_its_time_budget_is_spent_and_asks_for_the_next_at_once(store, clock):
    """The budget is read on the daemon's clock: with none (0 s) each pass still launches one
    queued job, so a queue always drains; the pass still looks at its running jobs."""
    waits, launched = drain(store, clock, Settings(launch_budget_s=0), queued=3, passes=3)
    assert launched == [1, 2, 3]
    assert waits[0] == 0 and waits[1] == 0 and waits[2] > 0


class TickingClock(FakeClock):
    """A fake clock that moves ``tick_s`` each time it is read: work takes time."""

    def __init__(self, tick_s: float) -> None:
        super().__init__()
        self.tick_s = tick_s

    def now(self):  # type: ignore[no-untyped-def]
        return self.advance(self.tick_s)


def test_the_time_budget_counts_the_passs_own_time(store):
    clock = TickingClock(0.01)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_budget_s=0.5))
    for i in range(100):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    assert rec.run_pass() == 0  # not all launched: the next pass comes at once
    first = sum(s != JobStatus.QUEUED for s in statuses(store))
    assert 1 <= first < 100
    for _ in range(100):
        if rec.run_pass() > 0:
            break
    assert JobStatus.QUEUED not in statuses(store)
