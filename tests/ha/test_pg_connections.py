"""The PostgreSQL store's connections: reads in autocommit, pooled connections pinged only after
sitting idle, and one the server dropped meanwhile replaced without the caller seeing it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.store import Job, Store, db

pytestmark = pytest.mark.postgres
pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg is in it)")

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _driver(s):  # type: ignore[no-untyped-def]
    return s.connection().connection.driver_connection


def test_a_read_runs_in_autocommit_and_a_write_in_one_transaction(store):
    with store.read() as s:
        assert _driver(s).autocommit is True  # no BEGIN and ROLLBACK around a read
        assert s.exec(text("SHOW transaction_isolation")).one()[0] == "read committed"
    with pytest.raises(RuntimeError), store.write() as s:
        assert _driver(s).autocommit is False
        s.add(Job(name="gone", spec="{}", created_at=NOW, updated_at=NOW))
        s.flush()
        raise RuntimeError("the write fails after its insert")
    with store.read() as s:
        assert s.exec(select(Job).where(Job.name == "gone")).all() == []  # rolled back


def _pings(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    for engine in (store._read, store._write):
        real = engine.dialect.do_ping
        monkeypatch.setattr(engine.dialect, "do_ping", lambda conn, real=real: seen.append(1) or real(conn))
    return seen


def test_a_connection_used_again_at_once_is_not_pinged(store, monkeypatch):
    monkeypatch.setattr(db, "PING_IDLE_S", 3600.0)
    seen = _pings(store, monkeypatch)
    for _ in range(3):
        with store.read() as s:
            s.exec(select(Job)).all()
        with store.write() as s:
            s.exec(select(Job)).all()
    assert seen == []


def test_a_pooled_connection_the_server_dropped_while_idle_is_replaced(store, pg_url, monkeypatch):
    monkeypatch.setattr(db, "PING_IDLE_S", 0.0)  # every pooled connection has been idle long enough
    job = jobs.submit(store, SPEC, NOW)
    with store.read() as s, store.write() as w:  # one pooled connection in each engine
        s.exec(select(Job)).all()
        w.exec(select(Job)).all()
    seen = _pings(store, monkeypatch)
    other = Store(pg_url)
    try:
        with other.write() as s:  # the server drops the store's connections (a restart would too)
            dropped = s.exec(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                  "WHERE datname = current_database() AND pid <> pg_backend_pid()")).one()[0]
        assert dropped >= 2
    finally:
        other.close()
    with store.read() as s:
        assert [j.id for j in s.exec(select(Job))] == [job.id]
    with store.write() as s:
        row = s.get(Job, job.id)
        assert row is not None
        row.message = "written after the drop"
    with store.read() as s:
        assert s.get(Job, job.id).message == "written after the drop"  # type: ignore[union-attr]
    assert len(seen) >= 2  # each engine's dropped connection failed its ping and was replaced
