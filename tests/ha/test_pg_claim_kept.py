"""The claim's change signal on a real PostgreSQL (``store/pg_signal.py``, issue 18): with nothing
committed since the last claim, a claim reads nothing but the server's snapshot, yet sees at once
a commit by another connection (another daemon, a submit, a cancel), and the daemon's own
heartbeat (``Store.write_unwatched``) is no change. Statements counted; nothing timed.

Transaction ids are the whole server's: the other test workers' databases on a shared server
would move the signal at any time (which only makes a claim read, as without a signal). So
these tests run on a throwaway cluster of their own, autovacuum off: nothing else writes there.
"""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store import Store
from gpuorch.store.heartbeat import Beater, read_state
from gpuorch.store.models import Job
from tests.claim_kit import claim
from tests.ha.conftest import _Cluster, _pg_bin, _psycopg

pytestmark = pytest.mark.postgres
pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg is in it)")

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})
SNAPSHOT = "SELECT pg_current_snapshot()::text"


@pytest.fixture(scope="module")
def quiet_server():
    """(host, port) of a PostgreSQL cluster only this module uses."""
    initdb = _pg_bin("initdb")
    if initdb is None:
        pytest.skip("no initdb: install PostgreSQL (apt-get install postgresql) or run scripts/test-services.sh")
    cluster = _Cluster(initdb)
    try:
        cluster.start("-c autovacuum=off")
        yield "127.0.0.1", cluster.port
    finally:
        cluster.stop()


@pytest.fixture
def store(quiet_server):
    host, port = quiet_server
    with _psycopg().connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS gpuorch_quiet WITH (FORCE)")
        conn.execute("CREATE DATABASE gpuorch_quiet")
    s = Store(f"postgresql+psycopg://postgres@{host}:{port}/gpuorch_quiet")
    yield s
    s.close()


class Statements:
    def __init__(self, store: Store) -> None:
        self.store, self.seen = store, []

    def __enter__(self) -> list[str]:
        event.listen(self.store._read, "before_cursor_execute", self._record)
        return self.seen

    def __exit__(self, *exc: object) -> None:
        event.remove(self.store._read, "before_cursor_execute", self._record)

    def _record(self, conn, cursor, statement, *rest):  # type: ignore[no-untyped-def]
        self.seen.append(statement.strip())


def test_the_version_moves_with_another_connections_commit_and_not_with_reads(store, clock):
    other = Store(store.url)
    try:
        v = store.data_version()
        assert v is not None and store.data_version() == v
        with store.read() as s:
            s.exec(select(Job)).all()
        assert store.data_version() == v  # a read is no change
        jobs.submit(other, SPEC, clock.now())
        assert (v2 := store.data_version()) != v
        jobs.submit(store, SPEC, clock.now())  # this store's own writes count too
        assert store.data_version() != v2
    finally:
        other.close()


def test_a_transaction_in_progress_at_one_look_counts_when_it_ends(store, clock):
    other = Store(store.url)
    try:
        with other.write() as s:
            s.add(Job(name="x", spec="{}", created_at=clock.now(), updated_at=clock.now()))
            s.flush()  # it has an xid now, uncommitted
            v = store.data_version()
        assert store.data_version() != v  # it committed after that look
    finally:
        other.close()


def test_a_claim_with_nothing_committed_since_reads_only_the_snapshot(store, clock):
    ids = [jobs.submit(store, SPEC, clock.now()).id for _ in range(3)]
    leases, known = Leases(store, "d1", lease_s=60), {}
    claim(leases, clock, known)
    second = claim(leases, clock, known)
    clock.advance(5)
    with Statements(store) as seen:
        third = claim(leases, clock, known)
    assert seen == [SNAPSHOT]
    assert [j.id for j in third] == ids and all(a is b for a, b in zip(third, second, strict=True))
    other = Store(store.url)
    try:
        jobs.cancel(other, str(ids[0]), clock.now())  # another process's commit: seen at once
    finally:
        other.close()
    got = {j.id: j for j in claim(leases, clock, known)}
    assert got[ids[0]].cancel_requested


def test_the_daemons_heartbeat_is_no_change_but_another_daemons_claim_is(store, clock):
    jobs.submit(store, SPEC, clock.now())
    leases, known = Leases(store, "d1", lease_s=60), {}
    beater = Beater(store, "d1", 5.0, "test")
    beater.started(clock.now())
    claim(leases, clock, known)
    claim(leases, clock, known)
    v = store.data_version()
    assert beater.passed(clock.now(), "ok")
    assert store.data_version() == v
    assert read_state(store, clock.now())["daemons"][0]["last_outcome"] == "ok"  # and committed
    with Statements(store) as seen:
        claim(leases, clock, known)
    assert seen == [SNAPSHOT]
    other = Store(store.url)
    try:
        new = jobs.submit(other, SPEC, clock.now()).id
    finally:
        other.close()
    assert new in {j.id for j in claim(leases, clock, known)}


def test_a_server_without_the_snapshot_functions_gives_no_signal_and_every_claim_reads(store, clock):
    """PostgreSQL before 13 has no ``pg_current_snapshot``: no signal (the claim reads, as without
    one), and the daemon's heartbeat, written first, is not aborted by the missing function."""
    signal = store._snapshots
    signal.SNAPSHOT = "SELECT no_such_function_here()::text"  # as an older server answers
    (job_id,) = [jobs.submit(store, SPEC, clock.now()).id]
    beater = Beater(store, "d1", 5.0, "test")
    beater.started(clock.now())
    assert beater.passed(clock.now(), "ok")
    assert read_state(store, clock.now())["daemons"][0]["last_outcome"] == "ok"
    assert signal.available is False and store.data_version() is None
    leases, known = Leases(store, "d1", lease_s=60), {}
    claim(leases, clock, known)
    with Statements(store) as seen:
        assert [j.id for j in claim(leases, clock, known)] == [job_id]
    assert any("FROM job" in s for s in seen)  # read again: nothing tells it the store is unchanged
