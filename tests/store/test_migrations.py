"""Schema 2 upgrades a real version-1 database (dumped before the change) without losing data."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlmodel import select

from gpuorch.store import Attempt, Job, JobStatus, Meta, Store
from gpuorch.store.migrations import SCHEMA_VERSION
from gpuorch.store.models import Sweep

V1 = Path(__file__).with_name("v1.sql")


def _columns(url: str) -> dict[str, set[str]]:
    insp = inspect(create_engine(url))
    return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}


def test_v1_database_upgrades_to_the_fresh_schema_keeping_its_rows(tmp_path):
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.executescript(V1.read_text())
    store = Store(f"sqlite:///{old}")
    assert store.installation_id == "v1fixture000"
    with store.read() as s:
        jobs = {j.name: j for j in s.exec(select(Job))}
        [a] = s.exec(select(Attempt)).all()
        version = s.get(Meta, "schema_version").value
    assert version == str(SCHEMA_VERSION) == "2"
    assert jobs["old-job"].status == JobStatus.SUCCEEDED and jobs["old-job"].sweep_id is None
    assert jobs["queued-job"].status == JobStatus.QUEUED
    assert (a.price_per_hour, a.instance_id, a.metrics_offset, a.price_changes) == (1.2, "fake-1", 0, None)

    # the new columns and table work, and the new status fits
    now = datetime(2026, 2, 1, tzinfo=UTC)
    with store.write() as s:
        sw = Sweep(name="sw", spec="{}", created_at=now, max_parallel=2)
        s.add(sw)
        s.flush()
        j = s.get(Job, jobs["queued-job"].id)
        j.sweep_id, j.params, j.status = sw.id, '{"LR": 0.1}', JobStatus.BUDGET_EXHAUSTED
    with store.read() as s:
        assert s.get(Job, j.id).status == JobStatus.BUDGET_EXHAUSTED

    fresh = tmp_path / "fresh.db"
    Store(f"sqlite:///{fresh}").close()
    assert _columns(f"sqlite:///{old}") == _columns(f"sqlite:///{fresh}")

