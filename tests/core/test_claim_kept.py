"""A claim with nothing committed since the last one reads nothing (``Leases._same``, issue 18),
yet sees at once a commit by anyone and every change that comes with time alone: another
daemon's lease expiring, its own lease coming due for renewal, a queued job's ``not_before``.

Real SQLite files, a second ``Store`` on the same file as "another process", a fake clock;
statements counted by a SQLAlchemy listener. Nothing is timed.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update
from sqlmodel import col, select
from test_steady_pass import statements

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store import Store
from gpuorch.store.models import Job
from tests.claim_kit import claim

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})


def test_data_version_changes_with_any_commit_and_only_then(store, clock):
    other = Store(store.url)
    try:
        v = store.data_version()
        assert v is not None and store.data_version() == v
        with store.read() as s:
            s.exec(select(Job)).all()
        assert store.data_version() == v  # a read is no change
        jobs.submit(other, SPEC, clock.now())
        assert (v2 := store.data_version()) != v  # another connection's commit
        jobs.submit(store, SPEC, clock.now())
        assert store.data_version() != v2  # this store's own engines are other connections too
    finally:
        other.close()
    memory = Store("sqlite:///:memory:")
    assert memory.data_version() is None  # in memory: no signal, every claim reads
    memory.close()


def test_a_claim_with_nothing_committed_since_reads_nothing_and_returns_the_same_rows(store, clock):
    ids = [jobs.submit(store, SPEC, clock.now()).id for _ in range(3)]
    leases, known = Leases(store, "d1", lease_s=60), {}
    first = claim(leases, clock, known)  # takes them: a write
    second = claim(leases, clock, known)  # reads what the write left: the answer to keep
    assert [j.id for j in first] == [j.id for j in second] == ids
    clock.advance(5)
    with statements(store) as seen:
        third = claim(leases, clock, known)
    assert seen == []
    assert all(a is b for a, b in zip(third, second, strict=True))


def test_a_cancel_committed_elsewhere_is_seen_by_the_next_claim(store, clock):
    (job_id,) = [jobs.submit(store, SPEC, clock.now()).id]
    leases, known = Leases(store, "d1", lease_s=60), {}
    claim(leases, clock, known)
    claim(leases, clock, known)
    other = Store(store.url)
    try:
        jobs.cancel(other, str(job_id), clock.now())
    finally:
        other.close()
    (job,) = claim(leases, clock, known)
    assert job.cancel_requested


def test_another_daemons_lease_is_taken_once_it_expires_with_no_commit_in_between(store, clock):
    mine, theirs = jobs.submit(store, SPEC, clock.now()).id, jobs.submit(store, SPEC, clock.now()).id
    with store.write() as s:  # the other daemon holds one job for 30 s more
        s.exec(update(Job).where(col(Job.id) == theirs)
               .values(lease_owner="d2", lease_expires=clock.now() + timedelta(seconds=30)))
    leases, known = Leases(store, "d1", lease_s=60), {}
    claim(leases, clock, known)
    assert [j.id for j in claim(leases, clock, known)] == [mine]
    clock.advance(29)
    assert [j.id for j in claim(leases, clock, known)] == [mine]
    clock.advance(2)
    assert sorted(j.id for j in claim(leases, clock, known)) == [mine, theirs]


def test_its_own_lease_is_renewed_when_due_with_no_commit_in_between(store, clock):
    (job_id,) = [jobs.submit(store, SPEC, clock.now()).id]
    leases, known = Leases(store, "d1", lease_s=60), {}
    claim(leases, clock, known)
    (job,) = claim(leases, clock, known)
    expires = job.lease_expires
    clock.advance(21)  # less than 2/3 of the lease left: renewed at the next claim
    (job,) = claim(leases, clock, known)
    assert job.id == job_id
    with store.read() as s:
        assert s.get(Job, job_id).lease_expires > expires  # type: ignore[union-attr,operator]


def test_a_queued_job_whose_not_before_passes_moves_the_queue_head_with_no_commit_in_between(store, clock):
    """With a queued limit of one, the head is the oldest due job: a job waiting for its
    ``not_before`` is held meanwhile as any other, and once it is due it is the head and the
    younger one leaves the claim."""
    waiting, due = jobs.submit(store, SPEC, clock.now()).id, jobs.submit(store, SPEC, clock.now()).id
    with store.write() as s:
        s.exec(update(Job).where(col(Job.id) == waiting).values(not_before=clock.now() + timedelta(seconds=10)))
    leases, known = Leases(store, "d1", lease_s=60), {}
    for _ in range(2):
        got = leases.claim(clock.now(), known=known, queued=1)
        known = {j.id: j for j in got}
    assert sorted(known) == [waiting, due]
    clock.advance(11)
    assert [j.id for j in leases.claim(clock.now(), known=known, queued=1)] == [waiting]


def test_the_daemons_heartbeat_is_no_change_for_the_claim_but_a_job_written_beside_it_is(store, clock):
    from gpuorch.store.heartbeat import Beater, read_state

    jobs.submit(store, SPEC, clock.now())
    leases, known = Leases(store, "d1", lease_s=60), {}
    beater = Beater(store, "d1", 5.0, "test")
    beater.started(clock.now())
    claim(leases, clock, known)
    claim(leases, clock, known)
    v = store.data_version()
    assert beater.passed(clock.now(), "ok")
    assert store.data_version() == v  # written through the signal's own connection
    assert read_state(store, clock.now())["daemons"][0]["last_outcome"] == "ok"  # and committed
    with statements(store) as seen:
        claim(leases, clock, known)
    assert seen == []
    other = jobs.submit(store, SPEC, clock.now()).id
    assert other in {j.id for j in claim(leases, clock, known)}


def test_backoffs_are_read_again_only_after_a_commit_and_drop_out_when_they_end(store, clock):
    from gpuorch.reconciler.observe.listing import Backoffs
    from gpuorch.store.models import Backoff

    backoffs = Backoffs(store)
    assert backoffs.read(clock.now(), store.data_version()) is None
    other = Store(store.url)
    try:
        with other.write() as s:
            s.add(Backoff(key="sim/us-east-1", until=clock.now() + timedelta(seconds=10)))
    finally:
        other.close()
    v = store.data_version()
    first = backoffs.read(clock.now(), v)
    assert first is not None and first.key == {"sim/us-east-1"}
    clock.advance(5)
    with statements(store) as seen:
        assert backoffs.read(clock.now(), v) is first  # nothing committed: no read, the same predicate
        clock.advance(6)
        assert backoffs.read(clock.now(), v) is None  # its time ended, with no commit in between
    assert seen == []
