"""A pass over running jobs that changed nothing is cheap: no writes, a fixed number of queries
whatever the number of jobs, heartbeats at their own pace. And the shortcuts keep the lease
rules: a daemon whose lease lapsed or was taken over does nothing, whatever it had cached.

Real SQLite store, the FakeProvider, a fake clock; statements counted by a SQLAlchemy listener.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import event
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Instance, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}
WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN IMMEDIATE")


@contextmanager
def statements(store) -> Iterator[list[str]]:  # type: ignore[no-untyped-def]
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        seen.append(statement.strip())

    engines = {store._read, store._write}
    for e in engines:
        event.listen(e, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for e in engines:
            event.remove(e, "before_cursor_execute", record)


def writes(seen: list[str]) -> list[str]:
    return [s for s in seen if s.upper().startswith(WRITES)]


def running(store, clock, fake, rec, n: int) -> list[int]:  # type: ignore[no-untyped-def]
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"j{i}"}), clock.now()).id for i in range(n)]
    for _ in range(4):
        rec.run_pass()
        clock.advance(2)
    with store.read() as s:
        assert {j.status for j in s.exec(select(Job))} == {JobStatus.RUNNING}
    return ids  # type: ignore[return-value]


def make(store, clock, **settings):  # type: ignore[no-untyped-def]
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    return fake, Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(**settings), owner="d1")


def test_a_steady_pass_writes_nothing(store, clock):
    fake, rec = make(store, clock)
    running(store, clock, fake, rec, 5)
    with statements(store) as seen:
        rec.run_pass()
        clock.advance(2)
        rec.run_pass()
        passes = list(seen)
        with store.read() as s:  # the listener sees what runs
            s.exec(select(Job)).all()
    assert writes(passes) == []
    assert passes == [] and seen[-1].startswith("SELECT job.id")  # nothing committed since: not even a read


def test_a_steady_pass_costs_the_same_queries_for_3_or_12_jobs(tmp_path, clock):
    from gpuorch.store import Store

    counts = []
    for n in (3, 12):
        store = Store(f"sqlite:///{tmp_path / f'{n}.db'}")
        fake, rec = make(store, clock)
        running(store, clock, fake, rec, n)
        with statements(store) as seen:
            rec.run_pass()
        counts.append(len(seen))
        store.close()
    assert counts[0] == counts[1]


def test_leases_are_renewed_in_bulk_once_a_third_has_run_out(store, clock):
    fake, rec = make(store, clock)
    running(store, clock, fake, rec, 3)

    def expiries() -> set:
        with store.read() as s:
            return {j.lease_expires for j in s.exec(select(Job))}

    [first] = expiries()
    clock.advance(10)
    rec.run_pass()
    assert expiries() == {first}  # 10 s into a 60 s lease: not rewritten
    clock.advance(12)  # less than two thirds left now
    with statements(store) as seen:
        rec.run_pass()
    [renewed] = expiries()
    assert renewed == clock.now() + timedelta(seconds=60)
    assert len([w for w in writes(seen) if w.upper().startswith("UPDATE JOB")]) == 1


def test_heartbeats_go_out_at_their_own_pace_not_every_pass(store, clock):
    fake, rec = make(store, clock, heartbeat_timeout_s=40.0)  # every 10 s (a quarter of the timeout)
    running(store, clock, fake, rec, 2)
    before = fake.count("runner.heartbeat")
    for _ in range(30):  # 60 s of passes every 2 s
        rec.run_pass()
        clock.advance(2)
    assert fake.count("runner.heartbeat") - before == 2 * 6  # every 10 s per running attempt, not 30 times


def test_an_instance_state_change_is_mirrored_and_an_unchanged_one_is_not_rewritten(store, clock):
    fake, rec = make(store, clock)
    [job_id] = running(store, clock, fake, rec, 1)
    with store.read() as s:
        [row] = s.exec(select(Instance))
    assert row.state == "running"
    with statements(store) as seen:
        rec.run_pass()
    assert not any("instance" in w.lower() for w in writes(seen))
    fake.vanish(row.instance_id)
    rec.run_pass()  # ends the attempt and launches a replacement
    rec.run_pass()  # which the listing shows from now on
    with store.read() as s:
        rows = {r.instance_id: r for r in s.exec(select(Instance))}
    assert rows[row.instance_id].state == "gone" and rows[row.instance_id].terminated_at is not None
    assert len(rows) == 2  # the replacement is mirrored as well


def test_a_daemon_whose_lease_was_taken_over_acts_on_nothing_it_had_cached(store, clock):
    fake, d1 = make(store, clock, poll_s=2.0)
    [job_id] = running(store, clock, fake, d1, 1)
    d2 = Reconciler(store, {"fake": fake}, clock=clock, owner="d2")
    clock.advance(61)  # d1 stalls past its lease; d2 takes the job over
    d2.run_pass()
    with store.read() as s:
        assert s.get(Job, job_id).lease_owner == "d2"
        [a1] = s.exec(select(Attempt).where(Attempt.job_id == job_id))
    fake.vanish(a1.instance_id)
    launches = fake.count("launch")
    with statements(store) as seen:
        d1.run_pass()  # its spec cache and heartbeat memory are of no use: it holds no lease
    job_tables = ("UPDATE JOB", "INSERT INTO ATTEMPT", "UPDATE ATTEMPT", "INSERT INTO EVENT")
    job_writes = [w for w in writes(seen) if w.upper().startswith(job_tables)]
    assert job_writes == [] and fake.count("launch") == launches  # (it may mirror the instance table)
    d2.run_pass()
    with store.read() as s:
        numbers = [(a.number, a.status) for a in s.exec(select(Attempt).where(Attempt.job_id == job_id)
                                                          .order_by(Attempt.number))]
    assert numbers == [(1, AttemptStatus.ENDED), (2, AttemptStatus.LAUNCHED)]
    assert fake.count("launch") == launches + 1


def test_queued_jobs_with_the_same_needs_are_placed_once_on_an_index_kept_across_passes(store, clock):
    fake, rec = make(store, clock)
    for i in range(6):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    rec.run_pass()
    index = rec.offers.index()
    assert len(index.placed) == 1  # six jobs, one ranking; the other five were lookups
    with store.read() as s:
        assert {j.status for j in s.exec(select(Job))} == {JobStatus.STARTING}
    clock.advance(2)
    jobs.submit(store, parse_spec({**SPEC, "name": "later"}), clock.now())
    rec.run_pass()
    assert rec.offers.index() is index and len(index.placed) == 1  # same catalog: same index, same memo
    assert fake.count("offers") == 1


def test_queued_jobs_left_for_a_later_batch_cost_no_query(tmp_path, clock):
    from gpuorch.store import Store

    counts = []
    for n in (3, 12):
        store = Store(f"sqlite:///{tmp_path / f'q{n}.db'}")
        fake, rec = make(store, clock, launch_batch=1)
        for i in range(n):
            jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
        rec.run_pass()  # offers read, one job launched
        clock.advance(2)
        with statements(store) as seen:
            rec.run_pass()  # the next one launched; the other n - 2 wait, untouched
        counts.append(len(seen))
        store.close()
    assert counts[0] == counts[1]
