"""Reading jobs and their attempts from a SQLite store with the stdlib ``sqlite3``, without
SQLAlchemy: the cold start of ``gpuorch status`` (importing the ORM takes about a second).

Rows come back as ``Row`` objects whose attributes have the names and Python types the ORM
models give (aware UTC datetimes, bools, the status enums), so ``gpuorch.jobs.service``'s one
summary code reads either. Only a store this gpuorch has created or migrated is read here:
``open_lite`` answers None for anything else (no file yet, another schema version, not SQLite),
and the caller opens the full ``Store``, which creates or migrates it as always.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

# Bump with migrations.MIGRATIONS (tests/store/test_lite.py checks they agree).
SCHEMA_VERSION = 14
BUSY_TIMEOUT_S = 30.0

# Enum columns are stored by name (SQLAlchemy's Enum), as on the models.
_ENUMS: dict[str, dict[str, type[StrEnum]]] = {
    "job": {"status": JobStatus},
    "attempt": {"status": AttemptStatus, "reason": TerminationReason},
}


class Row(SimpleNamespace):
    """One table row with the attributes of its model."""


def _datetime(v: Any) -> datetime | None:
    if v is None:
        return None
    dt = datetime.fromisoformat(v) if isinstance(v, str) else v
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt  # stored naive UTC (models.UTCDateTime)


def sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (None for other databases, in-memory ones and
    URLs with options, which the full ``Store`` handles)."""
    if not url.startswith("sqlite:///") or "?" in url:
        return None
    path = url[len("sqlite:///"):]
    return Path(path) if path and path != ":memory:" else None


class LiteReader:
    """A read transaction's worth of queries over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._convert: dict[str, dict[str, Any]] = {}

    def _converters(self, table: str) -> dict[str, Any]:
        if table not in self._convert:
            conv: dict[str, Any] = {}
            for _cid, name, decl, *_ in self.conn.execute(f"PRAGMA table_info({table})"):
                decl = (decl or "").upper()
                if name in _ENUMS.get(table, {}):
                    enum = _ENUMS[table][name]
                    conv[name] = lambda v, e=enum: None if v is None else e[v]
                elif decl == "DATETIME":
                    conv[name] = _datetime
                elif decl == "BOOLEAN":
                    conv[name] = lambda v: None if v is None else bool(v)
            self._convert[table] = conv
        return self._convert[table]

    def _rows(self, table: str, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        conv = self._converters(table)
        return [Row(**{n: conv[n](v) if n in conv else v for n, v in zip(names, values, strict=True)})
                for values in cur.fetchall()]

    def jobs(self) -> list[Row]:
        return self._rows("job", "SELECT * FROM job ORDER BY id")

    def find_job(self, ref: str) -> Row | None:
        """A job by id, or the newest job with that name (as ``gpuorch.jobs.intent.find_job``)."""
        from gpuorch.store.refs import row_id

        n = row_id(ref)
        if n is not None:
            rows = self._rows("job", "SELECT * FROM job WHERE id = ?", (n,))
        else:
            rows = self._rows("job", "SELECT * FROM job WHERE name = ? ORDER BY id DESC LIMIT 1", (ref,))
        return rows[0] if rows else None

    def attempts(self) -> dict[int, list[Row]]:
        """Every attempt, by job id, in number order."""
        out: dict[int, list[Row]] = {}
        for a in self._rows("attempt", "SELECT * FROM attempt ORDER BY job_id, number"):
            out.setdefault(a.job_id, []).append(a)
        return out

    def last_event(self, job_id: int, kind: str) -> Row | None:
        rows = self._rows("event", "SELECT * FROM event WHERE job_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
                          (job_id, kind))
        return rows[0] if rows else None

    def attempts_of(self, job_id: int) -> list[Row]:
        return self._rows("attempt", "SELECT * FROM attempt WHERE job_id = ? ORDER BY number", (job_id,))

    def heartbeats(self) -> list[Row]:
        return self._rows("heartbeat", "SELECT * FROM heartbeat ORDER BY started_at")

    def leases(self, now: datetime) -> dict[str, int]:
        """Unexpired job leases by owner."""
        return dict(self.conn.execute("SELECT lease_owner, count(*) FROM job WHERE lease_owner IS NOT NULL "
                                      "AND lease_expires > ? GROUP BY lease_owner",
                                      (f"{now.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}",)).fetchall())


def open_lite(url: str) -> sqlite3.Connection | None:
    """A connection to a current SQLite store, inside a read transaction; None if the full
    ``Store`` must open it (not SQLite, no file yet, no installation id, another schema version)."""
    path = sqlite_path(url)
    if path is None or not path.is_file():
        return None
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("BEGIN")
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'installation_id')"))
    except sqlite3.DatabaseError:  # no meta table: an empty or foreign file
        conn.close()
        return None
    if meta.get("schema_version") != str(SCHEMA_VERSION) or "installation_id" not in meta:
        conn.close()
        return None
    return conn
