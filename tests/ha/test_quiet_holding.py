"""Holding jobs that nothing touches costs no work a job (issue 32, item 5).

A pass whose claim holds the last pass's very rows, none taken anew (``Leases.unchanged``: a
renewal keeps them, a cancel or a write does not), keeps the queued jobs no offer fits as one
set (``WaitingJobs.untouched``), not with a look at each. The lease rules hold as before: another
daemon takes nothing renewed, and takes a job over once the renewed lease has expired.

SQLite files (a second ``Store`` on the same file as another process) with a fake clock, the
rules again on PostgreSQL, and the assembled daemon. Statements counted; nothing timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store import Store
from gpuorch.store.models import Event, Job
from gpuorch.testing.daemon import AssembledDaemon
from tests.claim_kit import claim

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})


@pytest.fixture
def lite(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    s = Store(url)
    yield s
    s.close()


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """The statements the store's engines run meanwhile."""
    seen: list[str] = []

    def record(conn, cursor, statement, *rest):  # type: ignore[no-untyped-def]
        seen.append(statement.strip())

    engines = {store._read, store._write}
    for e in engines:
        event.listen(e, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for e in engines:
            event.remove(e, "before_cursor_execute", record)


def _expires(store: Store, job_id: int):  # type: ignore[no-untyped-def]
    with store.read() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job.lease_expires


def test_a_renewal_keeps_the_rows_the_claim_holds(lite, clock):
    ids = [jobs.submit(lite, SPEC, clock.now()).id for _ in range(3)]
    leases, known = Leases(lite, "d1", lease_s=60), {}
    claim(leases, clock, known)  # takes them: read anew
    assert not leases.unchanged
    kept = claim(leases, clock, known)
    assert leases.unchanged  # the same rows, none taken
    clock.advance(5)
    with statements(lite) as seen:
        again = claim(leases, clock, known)
    assert leases.unchanged and all(a is b for a, b in zip(again, kept, strict=True))
    assert seen == []  # nothing committed since: not even a read (``Leases._same``)
    clock.advance(16)  # less than 2/3 of the lease left: renewed
    renewed = claim(leases, clock, known)
    assert leases.unchanged and all(a is b for a, b in zip(renewed, kept, strict=True))
    until = clock.now() + timedelta(seconds=60)
    assert [j.lease_expires for j in renewed] == [_expires(lite, i) for i in ids] == [until] * 3
    claim(leases, clock, known)  # the renewal read back
    assert leases.unchanged


def test_leases_taken_apart_are_renewed_together_and_a_renewal_alone_reads_nothing(lite, clock):
    first = jobs.submit(lite, SPEC, clock.now()).id
    leases, known = Leases(lite, "d1", lease_s=60), {}
    claim(leases, clock, known)
    clock.advance(5)
    second = jobs.submit(lite, SPEC, clock.now()).id
    claim(leases, clock, known)  # takes the second, 5 s after the first
    claim(leases, clock, known)
    clock.advance(16)  # the first is due for renewal, the second not yet: both are renewed
    with statements(lite) as seen:
        got = claim(leases, clock, known)
    assert [s for s in seen if not s.upper().startswith(("UPDATE", "BEGIN"))] == []  # nothing read
    until = clock.now() + timedelta(seconds=60)
    assert [j.lease_expires for j in got] == [_expires(lite, first), _expires(lite, second)] == [until] * 2
    assert leases.unchanged
    clock.advance(25)  # a commit, then a renewal due: the full claim renews them together too
    third = jobs.submit(lite, SPEC, clock.now()).id
    got = claim(leases, clock, known)
    assert [j.id for j in got] == [first, second, third] and leases.taken == {third}
    assert {_expires(lite, i) for i in (first, second, third)} == {clock.now() + timedelta(seconds=60)}


def test_a_claim_that_takes_a_job_beside_its_renewals_is_a_change(lite, clock):
    jobs.submit(lite, SPEC, clock.now())
    leases, known = Leases(lite, "d1", lease_s=60), {}
    claim(leases, clock, known)
    claim(leases, clock, known)
    clock.advance(21)
    new = jobs.submit(lite, SPEC, clock.now()).id
    before = lite.data_version()
    got = claim(leases, clock, known)
    assert new in {j.id for j in got} and leases.taken == {new}
    assert not leases.unchanged and lite.data_version() != before
    claim(leases, clock, known)
    assert leases.unchanged


def test_a_renewed_lease_is_nobody_elses_until_it_expires(any_store, clock):
    (job_id,) = [jobs.submit(any_store, SPEC, clock.now()).id]
    other = Store(any_store.url)
    try:
        mine, theirs = Leases(any_store, "d1", lease_s=60), Leases(other, "d2", lease_s=60)
        known: dict[int, Job] = {}
        claim(mine, clock, known)
        claim(mine, clock, known)
        clock.advance(21)
        claim(mine, clock, known)  # renewed alone: until 81 s
        assert mine.unchanged
        clock.advance(45)  # the first lease (60 s) is over, the renewed one is not
        assert theirs.claim(clock.now(), known={}) == []
        clock.advance(16)  # 82 s: d1 made no pass since; its renewed lease expired
        assert [j.id for j in theirs.claim(clock.now(), known={})] == [job_id]
        with other.read() as s:
            [ev] = s.exec(select(Event).where(Event.kind == "lease_taken_over")).all()
        assert ev.job_id == job_id
        assert [j.id for j in claim(mine, clock, known)] == [] and not mine.unchanged
    finally:
        other.close()


JOB = {"name": "w", "run": "true", "resources": {"gpu": "A100:80GB:1"}}


def test_unplaceable_jobs_are_kept_as_one_set_through_renewals_until_a_cancel(tmp_path):
    """``lease_s: 3``: renewed a second after each claim, so the passes below go through renewals."""
    with AssembledDaemon.start(tmp_path / "home", {"lease_s": 3, "max_sleep_s": 1}) as d:
        local, waiting = d.adapter("local"), d.rec.memo.waiting
        local._offers = []  # the market sells nothing that fits
        d.rec.invalidate_offers()
        ids = [d.submit({**JOB, "name": f"w{i}"}) for i in range(3)]
        d.run_pass()  # "no offer", written
        d.run_pass()  # the writes read back: each job looked at and kept
        assert waiting.noted == 3 and waiting.skipped == 3 and not waiting.untouched
        d.run_pass()
        assert waiting.untouched == set(ids) and waiting.skipped == 3
        first = _expires(d.store, ids[0])

        passes = []

        def renewed() -> bool:
            passes.append((waiting.untouched == set(ids), waiting.skipped, waiting.noted))
            return _expires(d.store, ids[0]) > first

        d.until(renewed, what="a lease renewal", timeout_s=30)
        assert passes and set(passes) == {(True, 3, 3)}  # the renewal's pass too
        d.run_pass()  # the renewal is no change: still kept as a set
        assert d.rec.leases.unchanged and waiting.untouched == set(ids)
        d.service.cancel(str(ids[0]))  # a commit: each job looked at again, the cancel decided
        d.run_pass()
        assert not waiting.untouched and d.job(ids[0]).status.terminal
        assert waiting.skipped == 2 and waiting.noted == 3
