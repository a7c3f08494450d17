"""A long queue drains in bounded batches: each pass launches at most ``Settings.launch_batch``
queued jobs (and, when set, only while the pass is younger than ``Settings.launch_budget_s``), and asks to
run again at once; it still looks at every running job (a notice is handled in a pass that leaves
queued jobs for the next). A batch's intents are one write transaction (the lease check of every
job in its ``SELECT``), its launches a few more, and a job whose lease is lost meanwhile is left
out of it. Real SQLite, FakeProvider, fake clock; statements counted by a SQLAlchemy listener.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import dataclasses
import threading
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


def sixty_launched_in_one_pass(store, clock, fake: FakeProvider) -> tuple[list[Attempt], list[str]]:  # type: ignore[no-untyped-def]
    """Sixty queued jobs, one pass: their attempt rows, and the pass's write transactions."""
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i in range(60):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    with write_transactions(store) as begins:
        rec.run_pass()
    with store.read() as s:
        return list(s.exec(select(Attempt))), begins


def test_a_pass_records_a_batch_of_launches_in_a_few_write_transactions(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rows, begins = sixty_launched_in_one_pass(store, clock, fake)
    assert len(rows) == 60 and {r.status for r in rows} == {AttemptStatus.LAUNCHED}
    assert len({r.job_id for r in rows}) == 60 and fake.count("launch") == 60  # one instance each
    # the claim, the 60 intents, the 60 launches in shares of 25 per pool worker: 1 + 1 + 3 (was
    # 2 a job: 120), whatever the number of jobs up to Applier's LAUNCH_BATCH
    assert len(begins) <= 6


def test_launches_that_cannot_block_are_made_on_the_pass_thread_and_recorded_in_one_transaction(store, clock):
    """As the sim's and the local provider's launches (local files)."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    fake.capabilities = dataclasses.replace(fake.capabilities, launches_may_block=False)
    threads: set[str] = set()
    real = fake.launch

    def launch(request):  # type: ignore[no-untyped-def]
        threads.add(threading.current_thread().name)
        return real(request)

    fake.launch = launch  # type: ignore[method-assign]
    rows, begins = sixty_launched_in_one_pass(store, clock, fake)
    assert len(rows) == 60 and {r.status for r in rows} == {AttemptStatus.LAUNCHED} and fake.count("launch") == 60
    assert threads == {threading.current_thread().name}  # the pass's (run_pass is called here): no pool thread
    assert len(begins) <= 3  # the claim, the 60 intents, the 60 launches (three shares, when they may block)


def pass_with_job_3_taken_over(store, clock, txn: str) -> tuple[FakeProvider, list[int]]:  # type: ignore[no-untyped-def]
    """Five queued jobs and one pass of daemon d1, in which another daemon takes job 3's lease
    just before the launching transaction ``txn`` (``_txn_many``: the intents; ``_txn_ids``: the
    launched records) runs."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now()).id for i in range(5)]
    real = getattr(rec.applier.launching, txn)
    assert real is not None

    def taken_over_first(job_ids):  # type: ignore[no-untyped-def]
        with store.write() as s:
            s.exec(update(Job).where(col(Job.id) == ids[2]).values(lease_owner="d2"))  # type: ignore[call-overload]
        return real(job_ids)

    setattr(rec.applier.launching, txn, taken_over_first)
    rec.run_pass()
    return fake, ids  # type: ignore[return-value]


def test_a_job_whose_lease_is_lost_is_left_out_of_the_batch_and_the_others_launch(store, clock):
    fake, ids = pass_with_job_3_taken_over(store, clock, "_txn_many")  # after this pass's claim
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


def test_a_pass_older_than_twice_its_budget_takes_no_more_queued_jobs(store, clock):
    """Time the pass spent elsewhere (its look at the cloud here; at 10,000 held jobs, their
    checks and the last batch's agent starts) counts too: a long queue never makes a long pass."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    listing = fake.list_managed

    def slow_listing():  # type: ignore[no-untyped-def]
        clock.advance(1.5)  # a listing that takes 1.5 s; the queued jobs' decisions take none
        return listing()

    fake.list_managed = slow_listing  # type: ignore[method-assign]
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_budget_s=0.5))
    for i in range(5):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    assert rec.run_pass() == 0  # the next pass comes at once
    assert sum(s != JobStatus.QUEUED for s in statuses(store)) == 1  # at least one a pass


def test_by_default_a_pass_is_bounded_by_its_count_not_the_clock(store):
    """Issue 32, item 5: a loaded host (each clock read 0.2 s later: decisions and launches that
    take seconds) launches as many a pass as a quiet one; the drain takes the same passes, so the
    same CPU a job. Without ``launch_budget_s`` only ``launch_batch`` cuts a pass."""
    clock = TickingClock(0.2)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=4))
    for i in range(10):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    launched = []
    for _ in range(3):
        rec.run_pass()
        launched.append(sum(s != JobStatus.QUEUED for s in statuses(store)))
    assert launched == [4, 8, 10]


def owned(store, owner: str) -> list[int]:  # type: ignore[no-untyped-def]
    with store.read() as s:
        return sorted(j.id for j in s.exec(select(Job).where(Job.lease_owner == owner)))  # type: ignore[misc]


def launched_ids(store) -> list[int]:  # type: ignore[no-untyped-def]
    with store.read() as s:
        return sorted(r.job_id for r in s.exec(select(Attempt)))


def test_a_pass_claims_and_views_only_the_head_of_the_queue_it_can_launch(store, clock, monkeypatch):
    """A pass claims (and so views) the queued jobs its launches can reach, the oldest first, not
    the whole queue; its running jobs are claimed as ever, and the rest of the queue stays free."""
    monkeypatch.setattr("gpuorch.reconciler.reconciler.QUEUED_CLAIM_MIN", 4)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=3), owner="d1")
    rec.queued_limit = 4
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now()).id for i in range(40)]
    viewed: list[int] = []
    real_view = rec._view
    monkeypatch.setattr(rec, "_view", lambda job, *a: viewed.append(job.id) or real_view(job, *a))
    assert rec.run_pass() == 0
    assert owned(store, "d1") == ids[:4] and launched_ids(store) == ids[:3]  # 4 claimed of 40, 3 launched
    assert viewed == ids[:3]  # the fourth was past the pass's launches: not viewed
    assert rec.queued_limit == 6  # twice what the pass's launches reached
    viewed.clear()
    rec.run_pass()
    assert owned(store, "d1") == ids[:9] and launched_ids(store) == ids[:6]  # 3 launched + the head's 6
    assert sorted(viewed) == ids[:6]
    for _ in range(20):
        rec.run_pass()
        clock.advance(2)
    assert launched_ids(store) == ids and JobStatus.QUEUED not in statuses(store)


def test_two_daemons_split_the_head_of_one_queue_and_never_launch_a_job_twice(store, clock, monkeypatch):
    monkeypatch.setattr("gpuorch.reconciler.reconciler.QUEUED_CLAIM_MIN", 4)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    d1, d2 = (Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=2), owner=o)
              for o in ("d1", "d2"))
    d1.queued_limit = d2.queued_limit = 4
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now()).id for i in range(30)]
    d1.run_pass()
    d2.run_pass()
    assert owned(store, "d1") == ids[:4] and owned(store, "d2") == ids[4:8]  # the next four free ones
    for _ in range(15):
        d1.run_pass()
        d2.run_pass()
        clock.advance(2)
    with store.read() as s:
        attempts = list(s.exec(select(Attempt)))
    assert sorted(a.job_id for a in attempts) == ids  # every job launched, once
    assert fake.count("launch") == len(ids) and len(fake.live_instances()) == len(ids)


def test_the_limit_grows_at_once_when_the_head_of_the_queue_does_not_use_the_budget(store, clock, monkeypatch):
    """With no launch cap and time to spare, a pass that ran out of claimed queued jobs asks for
    the next pass at once and claims twice as many: a long queue is not held to the floor."""
    monkeypatch.setattr("gpuorch.reconciler.reconciler.QUEUED_CLAIM_MIN", 2)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    rec.queued_limit = 2
    for i in range(13):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    waits, counts = [], []
    for _ in range(4):
        waits.append(rec.run_pass())
        counts.append(len(launched_ids(store)))
    assert counts == [2, 6, 13, 13] and waits[:2] == [0, 0] and waits[2] > 0  # 2, then 4 more, then the other 7


def test_a_cancel_far_down_the_queue_is_handled_in_the_next_pass(store, clock, monkeypatch):
    monkeypatch.setattr("gpuorch.reconciler.reconciler.QUEUED_CLAIM_MIN", 2)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=1), owner="d1")
    rec.queued_limit = 2
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now()).id for i in range(20)]
    with store.write() as s:
        s.exec(update(Job).where(col(Job.id) == ids[-1]).values(cancel_requested=True))  # type: ignore[call-overload]
    rec.run_pass()
    assert statuses(store)[-1] == JobStatus.CANCELLED and launched_ids(store) == ids[:1]


def test_the_launched_records_read_no_job_or_attempt_row_whole(store, clock):
    """``record_launched`` (on the launch pool's threads) reads the attempts' status and request
    time and the jobs' ids, not their ORM rows (a job row carries its spec, an attempt its offer)."""
    import threading

    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i in range(30):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    mine = threading.local()
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if getattr(mine, "on", False) and statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    recording = rec.applier.launching.record_launched

    def counted(launched, now):  # type: ignore[no-untyped-def]
        mine.on = True
        try:
            recording(launched, now)
        finally:
            mine.on = False

    rec.applier.launching.record_launched = counted  # type: ignore[method-assign]
    event.listen(store._write, "before_cursor_execute", record)
    try:
        rec.run_pass()
    finally:
        event.remove(store._write, "before_cursor_execute", record)
    with store.read() as s:
        rows = list(s.exec(select(Attempt)))
    assert len(rows) == 30 and {r.status for r in rows} == {AttemptStatus.LAUNCHED}
    assert all(r.instance_id and r.launched_at is not None for r in rows)
    assert seen and not [q for q in seen if "job.spec" in q or "attempt.offer" in q]  # was: both, whole rows


def test_a_job_whose_lease_is_lost_before_its_launch_is_recorded_stays_requested(store, clock):
    fake, ids = pass_with_job_3_taken_over(store, clock, "_txn_ids")  # while its instance was being launched
    with store.read() as s:
        by_job = {r.job_id: r for r in s.exec(select(Attempt))}
    assert fake.count("launch") == 5
    assert by_job[ids[2]].status == AttemptStatus.REQUESTED and by_job[ids[2]].instance_id is None
    assert {by_job[i].status for i in ids if i != ids[2]} == {AttemptStatus.LAUNCHED}
