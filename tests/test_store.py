from __future__ import annotations

import multiprocessing as mp
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlmodel import func, select

from gpuorch.store import Event, Job, Store
from gpuorch.store.migrations import SCHEMA_VERSION, SchemaTooNew, migrate


def _writer(url: str, tag: str, n: int) -> None:
    store = Store(url)
    for i in range(n):
        with store.write() as s:  # read, then write: the pattern that deadlocks without BEGIN IMMEDIATE
            count = s.exec(select(func.count()).select_from(Job)).one()
            s.add(Job(name=f"{tag}-{i}", spec="{}", created_at=datetime.now(UTC)))
            s.add(Event(ts=datetime.now(UTC), kind="test", message=f"{count}"))


def test_sqlite_is_wal_with_foreign_keys(store):
    with store.read() as s:
        assert s.exec(text("PRAGMA journal_mode")).one()[0] == "wal"
        assert s.exec(text("PRAGMA foreign_keys")).one()[0] == 1


def test_two_processes_writing_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    Store(url).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, tag, 150)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(url)
    with store.read() as s:
        assert s.exec(select(func.count()).select_from(Job)).one() == 300
        counts = sorted(int(e.message) for e in s.exec(select(Event)))
    assert counts == list(range(300))  # every read-then-write saw a consistent, serialized count


def test_reopening_keeps_data_and_installation_id(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = Store(url)
    with first.write() as s:
        s.add(Job(name="keep", spec="{}", created_at=datetime.now(UTC)))
    again = Store(url)
    assert again.installation_id == first.installation_id
    with again.read() as s:
        assert [j.name for j in s.exec(select(Job))] == ["keep"]


def test_migrations_run_in_order_above_the_stamp(store):
    applied = []
    steps = [(2, "add column", lambda c: (c.execute(text("ALTER TABLE job ADD COLUMN extra TEXT")), applied.append(2))),
             (3, "noop", lambda c: applied.append(3))]
    with store._write.begin() as conn:  # pretend the database is at version 1
        conn.execute(text("UPDATE meta SET value = '1' WHERE key = 'schema_version'"))
        assert migrate(conn, steps) == 3
    assert applied == [2, 3]
    with store._write.begin() as conn:
        migrate(conn, steps)  # already at 3: nothing runs again
    assert applied == [2, 3]


def test_a_newer_schema_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    s = Store(url)
    with s._write.begin() as conn:
        conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION + 1)})
    with pytest.raises(SchemaTooNew, match="upgrade gpuorch"):
        Store(url)



def test_sqlite_engines_keep_few_idle_connections_after_a_burst(tmp_path):
    """Eight threads reading at once all get a connection; afterwards each engine keeps at most
    POOL_KEEP of them (each holds a page cache), the others are closed."""
    import threading

    from gpuorch.store.db import POOL_KEEP

    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    together = threading.Barrier(8, timeout=30)
    counts: list[int] = []

    def read() -> None:
        with store.read() as s:
            counts.append(s.exec(select(func.count()).select_from(Job)).one())
            together.wait()  # all eight sessions hold a connection at this point

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts == [0] * 8
    assert store._read.pool.checkedin() <= POOL_KEEP  # type: ignore[attr-defined]
    assert store._read.pool.checkedout() == 0  # type: ignore[attr-defined]
