"""Leases on a real PostgreSQL: exclusive claims under concurrency, no waiting on a busy row,
takeover after expiry, a deposed daemon dropping its work, renewal in long passes, and an orphan
sweep that never takes another daemon's freshly launched instance.

Bare Reconciler: two reconcilers on one PostgreSQL database, with the FakeProvider and a fake
clock, interleaved pass by pass: the leases are what is under test.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.engine import make_url
from sqlmodel import select

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.decide.job import decide
from gpuorch.reconciler.observe.leases import LeaseLost, Leases
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job
from gpuorch.testing.e2e import events
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

pytestmark = pytest.mark.postgres
psycopg = pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg is in it)")

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})


@pytest.fixture
def fake(clock):
    return FakeProvider(clock, script=FakeJobScript(duration_s=300, checkpoint_every_s=60))


def submit(store, clock, n=1):
    return [jobs.submit(store, SPEC, clock.now()).id for _ in range(n)]


def owners(store):
    with store.read() as s:
        return {j.id: j.lease_owner for j in s.exec(select(Job))}


def test_concurrent_claims_never_share_a_job(pg_url, store, clock):
    ids = set(submit(store, clock, 40))
    daemons = [Leases(Store(pg_url), f"d{i}", lease_s=60) for i in range(4)]
    for round_ in range(6):
        go, got = threading.Barrier(len(daemons)), {}

        def claim(d: Leases, go: threading.Barrier = go, got: dict[str, set[int]] = got) -> None:
            go.wait()
            got[d.owner] = {j.id for j in d.claim(clock.now())}

        threads = [threading.Thread(target=claim, args=(d,)) for d in daemons]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        held = [got[d.owner] for d in daemons]
        assert sum(len(h) for h in held) == len(ids) and set().union(*held) == ids, round_  # disjoint, complete
        assert {j: o for j, o in owners(store).items()} == {j: d for d, h in got.items() for j in h}
        clock.advance(61)  # every lease expires: the next round is a race to take them all over
    for d in daemons:
        d.store.close()


def test_the_plain_conditional_update_is_exclusive_under_read_committed(pg_url, store, clock):
    """Why an UPDATE ... WHERE lease free would already be safe: the second UPDATE waits on the
    row lock, then re-checks its WHERE on the committed row (and finds it taken)."""
    [job_id] = submit(store, clock)
    u = make_url(pg_url)
    sql = ("UPDATE job SET lease_owner = %s, lease_expires = now() + interval '60 s' "
           "WHERE id = %s AND (lease_owner IS NULL OR lease_expires < now())")
    a = psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database)
    b = psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True)
    assert a.execute(sql, ("A", job_id)).rowcount == 1  # A's claim, not yet committed
    result = {}
    waiter = threading.Thread(target=lambda: result.setdefault("b", b.execute(sql, ("B", job_id)).rowcount))
    waiter.start()
    with psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True) as watch:
        while not watch.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
                                (b.info.backend_pid,)).fetchone():
            waiter.join(0.01)  # until B is blocked on A's row lock
    a.commit()
    waiter.join(30)
    assert result == {"b": 0} and owners(store) == {job_id: "A"}
    a.close()
    b.close()


def test_claim_skips_a_job_its_owner_is_writing_then_takes_it_over(pg_url, store, clock, fake):
    [job_id] = submit(store, clock)
    d1 = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    d2 = Reconciler(Store(pg_url), {"fake": fake}, clock=clock, owner="d2")
    d1.run_pass()
    with d1._txn(job_id):  # d1 is mid-write, its row locked
        clock.advance(61)  # ... and its lease runs out meanwhile
        assert d2.leases.claim(clock.now()) == []  # skipped, without waiting (same thread: a wait would hang)
    assert owners(store) == {job_id: "d1"}
    assert [j.id for j in d2.leases.claim(clock.now())] == [job_id]
    [ev] = events(store, "lease_taken_over")
    assert ev.job_id == job_id and '"previous_owner": "d1"' in ev.data
    with pytest.raises(LeaseLost):
        with d1._txn(job_id):
            pass
    d2.store.close()


def test_a_deposed_daemon_drops_its_work(pg_url, store, clock, fake):
    [job_id] = submit(store, clock)
    d1 = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    d2 = Reconciler(Store(pg_url), {"fake": fake}, clock=clock, owner="d2")
    d1.run_pass()
    with store.read() as s:
        [a1] = jobs.attempts_of(s, job_id)
    fake.vanish(a1.instance_id)
    # d1 looks and decides (attempt lost: end it, launch another) ... then stalls past its lease.
    [job] = d1.leases.claim(clock.now())
    observed, ok = d1._observe()
    view = d1._view(job, observed, ok)
    decision = decide(view, clock.now(), d1._current_offers(clock.now()))
    clock.advance(61)
    d2.run_pass()  # takes the job over and does the same work
    with pytest.raises(LeaseLost):
        d1.applier.apply(view, decision, clock.now())
    with store.read() as s:
        numbers = [(a.number, a.status) for a in jobs.attempts_of(s, job_id)]
    assert numbers == [(1, AttemptStatus.ENDED), (2, AttemptStatus.LAUNCHED)]  # one replacement, d2's
    assert len(fake.live_instances()) == 1 and fake.count("launch") == 2
    d2.store.close()


def test_a_long_pass_renews_its_leases(store, clock, fake):
    ids = submit(store, clock, 3)
    real_launch = fake.launch

    def slow_launch(req):  # each launch takes 25 s of a 60 s lease
        clock.advance(25)
        return real_launch(req)

    fake.launch = slow_launch
    rec = Reconciler(store, {"fake": fake}, clock=clock, owner="d1", lease_s=60)
    rec.run_pass()
    with store.read() as s:
        launched = [a.status for a in s.exec(select(Attempt).order_by(Attempt.job_id))]
        expires = {j.lease_expires for j in s.exec(select(Job))}
    assert launched == [AttemptStatus.LAUNCHED] * len(ids)  # the third was recorded 75 s into the pass
    assert min(expires) > clock.now()


def test_sweep_never_takes_an_instance_whose_attempt_another_daemon_committed(pg_url, store, clock, fake):
    d2 = Reconciler(Store(pg_url), {"fake": fake}, clock=clock, owner="d2")
    spy = FakeProvider(clock)  # d1's view of the same cloud, listing only after d2 has launched

    def list_after_d2_launched():
        submit(store, clock)
        d2.run_pass()  # commits attempt 1, then launches it
        d2.release_leases()  # so nothing but the attempt row protects the instance from d1's sweep
        return fake.list_managed()

    spy.list_managed = list_after_d2_launched
    spy.terminate = fake.terminate
    d1 = Reconciler(store, {"fake": spy}, clock=clock, owner="d1")
    d1.run_pass()  # claims (nothing yet), lists (d2 launches first), sweeps
    [inst] = fake.live_instances()
    assert inst.tags["gpuorch:attempt"] == "1"
    assert events(store, "orphan_terminated") == []


def test_sweep_leaves_the_instances_of_jobs_another_daemon_holds(pg_url, store, clock, fake):
    [job_id] = submit(store, clock)
    d2 = Reconciler(Store(pg_url), {"fake": fake}, clock=clock, owner="d2")
    d1 = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    d2.run_pass()
    with store.write() as s:  # d2 has ended the attempt and is about to terminate its instance
        a = s.exec(select(Attempt)).one()
        a.status = AttemptStatus.ENDED
    d1.run_pass()
    assert len(fake.live_instances()) == 1 and events(store, "orphan_terminated") == []  # d2's to do
    clock.advance(61)  # d2 died: its lease runs out
    d1.run_pass()  # takes the job over: the instance is its orphan now
    assert not fake.get(a.instance_id).state.alive
    assert [(e.job_id, e.attempt) for e in events(store, "orphan_terminated")] == [(job_id, 1)]
    assert owners(store)[job_id] == "d1"
    d2.store.close()


def test_a_takeover_never_acts_on_a_listing_older_than_the_previous_owners_writes(store, clock, fake):
    """d2's clock runs 61 s ahead of d1's, so d2 takes over a lease d1 still believes in. Had d2
    listed instances before claiming, d1 could launch and record attempt 1 in between, and d2
    would take the attempt for lost and launch a second instance. d2 claims first."""
    [job_id] = submit(store, clock)
    d1 = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    d1.leases.claim(clock.now())  # d1 holds the job (by its clock, for 60 s)
    ahead = FakeClock(clock.now() + timedelta(seconds=61))
    real_list, nested = fake.list_managed, []

    def list_then_let_d1_work():
        if nested:  # d1's own listing, inside
            return real_list()
        nested.append(True)
        listed = real_list()  # d2's listing ...
        d1.run_pass()  # ... then d1 works, its lease still valid by its clock
        return listed

    fake.list_managed = list_then_let_d1_work
    Reconciler(store, {"fake": fake}, clock=ahead, owner="d2").run_pass()
    fake.list_managed = real_list
    assert len(fake.list_managed()) == 1 and fake.count("launch") == 1
    with store.read() as s:
        assert [(a.number, a.status) for a in jobs.attempts_of(s, job_id)] == [(1, AttemptStatus.LAUNCHED)]
    assert owners(store) == {job_id: "d2"}


def test_the_head_of_the_queue_is_split_between_daemons_and_says_when_it_was_cut(pg_url, store, clock):
    """``claim(queued=)`` on PostgreSQL reads the head's ids once and names them in every later
    statement (``Leases._head``): the same jobs as the head's subquery would give."""
    ids = submit(store, clock, 5)
    d1, d2 = Leases(store, "d1", lease_s=60), Leases(Store(pg_url), "d2", lease_s=60)
    assert [j.id for j in d1.claim(clock.now(), known={}, queued=2)] == ids[:2]
    assert d1.truncated and d1.taken == set(ids[:2])
    assert [j.id for j in d2.claim(clock.now(), known={}, queued=2)] == ids[2:4]  # the head of those free
    assert d2.truncated
    with store.write() as s:  # job 1 launched: no longer in the head, still claimed (it needs attention)
        s.add(Attempt(job_id=ids[0], number=1, provider="fake", region="r", zone="z", instance_type="t",
                      status=AttemptStatus.LAUNCHED))
    known = {j.id: j for j in d1.claim(clock.now(), known={}, queued=10)}
    assert sorted(known) == [ids[0], ids[1], ids[4]] and not d1.truncated
    assert [j.id for j in d1.claim(clock.now(), known=known, queued=1)] == [ids[0], ids[1]]  # job 5 left out
    assert d1.truncated


def test_the_leases_of_a_daemon_known_dead_end_at_once_and_are_taken_over_with_an_event(pg_url, store, clock):
    """``Leases.expire_of`` (a restart that found the dead daemon's lock free, ``ops.presence``):
    its unexpired leases end now, and the next claim takes them over as it takes any expired one."""
    ids = set(submit(store, clock, 3))
    dead, new = Leases(Store(pg_url), "host/1/dead00", lease_s=600), Leases(Store(pg_url), "host/2/new000", lease_s=600)
    assert {j.id for j in dead.claim(clock.now())} == ids
    assert new.claim(clock.now()) == []  # held for 600 s
    assert new.expire_of(new.owner, clock.now()) == 0  # never its own
    assert new.expire_of(dead.owner, clock.now()) == 3
    clock.advance(0.001)
    assert {j.id for j in new.claim(clock.now())} == ids and set(owners(store).values()) == {new.owner}
    taken = events(store, "lease_taken_over")
    assert len(taken) == 3 and all("took over from host/1/dead00" in e.message for e in taken), taken
    for d in (dead, new):
        d.store.close()
