"""The state store: sqlmodel on SQLite (WAL) by default, PostgreSQL for several daemons.

Writing transactions on SQLite start with ``BEGIN IMMEDIATE``: a deferred BEGIN that reads and
then writes from several processes fails with "database is locked"; IMMEDIATE takes the write
lock up front and waits ``busy_timeout`` for it instead.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import DisconnectionError, IntegrityError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection, StaticPool
from sqlmodel import Session, create_engine, select

from gpuorch.store.migrations import migrate
from gpuorch.store.models import Meta
from gpuorch.store.paths import PRIVATE_FILE, default_home, default_url, private_dir, private_file
from gpuorch.store.pg_signal import SnapshotSignal

BUSY_TIMEOUT_MS = 30_000
# Idle connections each SQLite engine keeps. Every connection holds its own page cache (up to 2 MB):
# the default five per engine, kept after a burst of the launch pool's threads, cost the daemon
# ~1.5 MB of RSS at 1,000 jobs (docs/benchmarks.md, issue 11). Further concurrent users open their
# own connection and close it on return (unlimited overflow: nobody waits for one).
POOL_KEEP = 2
# A PostgreSQL connection that sat in the pool longer than this is pinged before use (the server
# may have restarted or dropped it meanwhile); one used again sooner is not. A ping is a round
# trip: on every checkout (``pool_pre_ping``) it was ~320 a 10,000-job drain, each waiting for
# the server's backend to be scheduled on a loaded host. A connection the server dropped within
# the last second fails its next statement instead, as one dropped mid-transaction always did,
# and SQLAlchemy then invalidates the pool: the next transaction connects afresh.
PING_IDLE_S = 1.0
_IDLE_SINCE = "gpuorch_idle_since"


def _prepare(dbapi_conn: sqlite3.Connection, _record: object = None) -> None:
    """Every SQLite connection of a store, the engines' and the change signal's own."""
    dbapi_conn.isolation_level = None  # pysqlite must not BEGIN on its own; we do (the engines' "begin")
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _sqlite_engine(url: str, immediate: bool, on_file: bool, **kwargs: object) -> Engine:
    pool = {"pool_size": POOL_KEEP, "max_overflow": -1} if on_file else {}  # in memory: one connection a thread
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
                           **(kwargs or pool))
    event.listen(engine, "connect", _prepare)

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _pg_engine(url: str, autocommit: bool) -> Engine:
    """A PostgreSQL engine whose pooled connections are pinged only after ``PING_IDLE_S`` idle.
    ``autocommit``: the read engine's. Every statement on PostgreSQL's default READ COMMITTED
    level takes its own snapshot anyway, so a read-only transaction gave its statements no
    common view; in autocommit a read costs its statements' round trips and no ``BEGIN`` and
    ``ROLLBACK`` (two more each). A read-only session never writes (``Store.read``)."""
    engine = create_engine(url, **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}))

    @event.listens_for(engine, "checkin")
    def _idle(_dbapi_conn: object, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_conn: object, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection) -> None:
        since = record.info.pop(_IDLE_SINCE, None)
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return  # new, or used just now
        try:
            engine.dialect.do_ping(dbapi_conn)  # type: ignore[arg-type]
        except Exception as e:  # the pool drops it and checks out another (SQLAlchemy's pessimistic recipe)
            raise DisconnectionError(f"a pooled connection failed its ping: {e}") from e

    return engine


class Store:
    """Opens (and migrates) the database. Use ``write()`` for transactions that change rows."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite"):
            path = url.split("///", 1)[-1]
            plain = bool(path) and path != ":memory:" and "?" not in path  # not an in-memory or URI database
            if plain:
                private_dir(Path(path).parent)
                Path(path).touch(mode=PRIVATE_FILE)  # before SQLite creates it with the umask's mode
            on_file = bool(path) and ":memory:" not in path and "mode=memory" not in path
            self._read = _sqlite_engine(url, immediate=False, on_file=on_file)
            self._write = _sqlite_engine(url, immediate=True, on_file=on_file)
        else:
            self._read, self._write = _pg_engine(url, autocommit=True), _pg_engine(url, autocommit=False)
        self.dialect = self._write.dialect.name  # "sqlite" or "postgresql": for statements that differ (bulk.py)
        with self._write.begin() as conn:
            if url.startswith("postgresql"):
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(4242)")  # one migrator at a time
            migrate(conn)
        if url.startswith("sqlite") and plain:
            for f in (path, f"{path}-wal", f"{path}-shm"):  # SQLite gives its side files the database's mode
                private_file(Path(f))
        # The change signal's own connection (data_version), and an engine on it (write_unwatched)
        self._version_path = path if url.startswith("sqlite") and plain else None
        self._version: sqlite3.Connection | None = None
        self._unwatched: Engine | None = None
        self._version_lock = threading.Lock()  # one user of that connection at a time
        self._snapshots = SnapshotSignal(self._read) if url.startswith("postgresql") else None
        self.installation_id = self._installation_id()

    def _version_conn(self) -> sqlite3.Connection:
        if self._version is None:
            assert self._version_path is not None
            self._version = sqlite3.connect(self._version_path, check_same_thread=False)
            _prepare(self._version)
        return self._version

    def data_version(self) -> int | None:
        """A number that changes whenever anyone (another process, or this one's own engines)
        commits to the store, except through ``write_unwatched``: SQLite's ``PRAGMA
        data_version`` on a connection of its own; PostgreSQL's transaction snapshot
        (``pg_signal.py``). None where there is no such signal (an in-memory database)."""
        if self._snapshots is not None:
            return self._snapshots.version()
        if self._version_path is None:
            return None
        with self._version_lock:
            return int(self._version_conn().execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def write_unwatched(self) -> Iterator[Session]:
        """``write``, but not a change for ``data_version``: for rows that nothing watching it
        reads (the daemon's heartbeat, written every few seconds, would otherwise make every
        claim read the jobs again). SQLite: on the change signal's own connection, whose own
        commits it does not count; PostgreSQL: its transaction id noted as not a change;
        elsewhere the same as ``write``."""
        if self._version_path is None:
            with self.write() as s:
                if self._snapshots is not None:
                    self._snapshots.note(s.connection())
                yield s
            return
        with self._version_lock:
            if self._unwatched is None:  # an engine whose one connection is the signal's
                conn = self._version_conn()
                self._unwatched = _sqlite_engine("sqlite://", True, False, creator=lambda: conn, poolclass=StaticPool)
            with Session(self._unwatched, expire_on_commit=False) as s, s.begin():
                yield s

    @classmethod
    def open_default(cls) -> Store:
        return cls(default_url())

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session that only reads. On PostgreSQL each statement commits on its own
        (autocommit, ``_pg_engine``): a write made here would not be rolled back."""
        with Session(self._read, expire_on_commit=False) as s:
            yield s

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One writing transaction: committed on success, rolled back on any exception."""
        with Session(self._write, expire_on_commit=False) as s:
            with s.begin():
                yield s

    def _installation_id(self) -> str:
        try:
            with self.write() as s:
                row = s.get(Meta, "installation_id")
                if row is None:
                    row = Meta(key="installation_id", value=uuid.uuid4().hex[:12])
                    s.add(row)
                return row.value
        except IntegrityError as e:  # PostgreSQL: another process's first open inserted it just now
            with self.read() as s:
                row = s.get(Meta, "installation_id")
                if row is None:  # the other insert rolled back after all
                    raise RuntimeError("meta.installation_id: missing after a concurrent first open; open again") from e
                return row.value

    def close(self) -> None:
        if self._unwatched is not None:
            self._unwatched.dispose()
            self._unwatched = None
        if self._version is not None:
            self._version.close()
            self._version = None
        self._read.dispose()
        if self._write is not self._read:
            self._write.dispose()


__all__ = ["Store", "default_home", "default_url", "select"]
