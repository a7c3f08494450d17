"""The job table's fill factor on PostgreSQL (``store/migrations.py``, ``JOB_FILLFACTOR``): a
fresh database gets it, and one of schema 13 gets it by migration 14."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gpuorch.store import Store
from gpuorch.store.migrations import JOB_FILLFACTOR, SCHEMA_VERSION

pytestmark = pytest.mark.postgres
pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg is in it)")

OPTIONS = "SELECT reloptions FROM pg_class WHERE relname = 'job' AND relkind = 'r'"


def test_a_fresh_database_and_a_migrated_one_keep_room_in_the_job_table(pg_url):
    store = Store(pg_url)
    with store.read() as s:
        assert s.connection().execute(text(OPTIONS)).scalar_one() == [f"fillfactor={JOB_FILLFACTOR}"]
    with store.write() as s:  # as schema 13 left it
        s.connection().execute(text("ALTER TABLE job RESET (fillfactor)"))
        s.connection().execute(text("UPDATE meta SET value = '13' WHERE key = 'schema_version'"))
    store.close()
    store = Store(pg_url)
    with store.read() as s:
        assert s.connection().execute(text(OPTIONS)).scalar_one() == [f"fillfactor={JOB_FILLFACTOR}"]
        version = s.connection().execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar_one()
    assert version == str(SCHEMA_VERSION) == "14"
    store.close()
