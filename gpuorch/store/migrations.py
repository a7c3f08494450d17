"""Versioned schema. A new database gets the current schema and is stamped with the latest
version; an existing one runs, in order, the migrations above its stamp, each in its own
transaction. To evolve the schema: change models.py, append a migration that brings an
existing database to the same shape (ALTER TABLE ...), and never edit a released one.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, text
from sqlmodel import SQLModel

from ..errors import GpuorchError
from . import models  # noqa: F401  (registers the tables on SQLModel.metadata)

Migration = tuple[int, str, Callable[[Connection], None]]

MIGRATIONS: list[Migration] = [
    # (1, "initial schema", ...) is the create_all of a fresh database; later ones go here.
]
SCHEMA_VERSION = 1 + len(MIGRATIONS)


class SchemaTooNew(GpuorchError):
    pass


def _version(conn: Connection) -> int | None:
    if not inspect(conn).has_table("meta"):
        return None
    row = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).first()
    return int(row[0]) if row else None


def _stamp(conn: Connection, version: int) -> None:
    params = {"v": str(version)}
    updated = conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), params)
    if updated.rowcount == 0:
        conn.execute(text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"), params)


def migrate(conn: Connection, migrations: list[Migration] | None = None) -> int:
    """Bring the schema to the latest version inside the caller's (exclusive) transaction."""
    migrations = MIGRATIONS if migrations is None else migrations
    latest = 1 + len(migrations)
    current = _version(conn)
    if current is None:
        SQLModel.metadata.create_all(conn)
        _stamp(conn, latest)
        return latest
    if current > latest:
        raise SchemaTooNew(
            f"the state store has schema version {current} but this gpuorch knows only {latest}; upgrade gpuorch"
        )
    for version, _desc, step in migrations:
        if version > current:
            step(conn)
            _stamp(conn, version)
    return latest
