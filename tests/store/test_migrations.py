"""Schemas 2, 3, 4 and 5 upgrade a real version-1 database (dumped before the change) without losing data."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlmodel import select

from gpuorch.jobs.service import JobService
from gpuorch.store import Attempt, AttemptStatus, Job, JobStatus, Meta, Store, TerminationReason
from gpuorch.store.migrations import MIGRATIONS, SCHEMA_VERSION, migrate
from gpuorch.store.models import Sweep

V1 = Path(__file__).with_name("v1.sql")


def _columns(url: str) -> dict[str, set[str]]:
    insp = inspect(create_engine(url))
    return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}



def _database_at(tmp_path, version: int):
    """A SQLite file as schema ``version`` left it: schema 1, then the migrations up to ``version``."""
    old = tmp_path / f"v{version}.db"
    with sqlite3.connect(old) as db:
        db.executescript(V1.read_text())
    engine = create_engine(f"sqlite:///{old}")
    with engine.begin() as conn:
        assert migrate(conn, MIGRATIONS[:version - 1]) == version
    engine.dispose()
    return old

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
    assert version == str(SCHEMA_VERSION) == "14"
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



def test_v2_database_upgrades_to_v3_with_volume_columns_on_job(tmp_path):
    old = _database_at(tmp_path, 2)
    assert "volume_id" not in _columns(f"sqlite:///{old}")["job"]
    store = Store(f"sqlite:///{old}")
    with store.write() as s:
        j = s.exec(select(Job).where(Job.name == "queued-job")).one()
        assert (j.volume_provider, j.volume_zone, j.volume_id) == (None, None, None)
        j.volume_provider, j.volume_region, j.volume_zone, j.volume_id = "aws", "us-east-1", "us-east-1a", "vol-1"
    with store.read() as s:
        assert s.get(Job, j.id).volume_id == "vol-1"
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION)


def test_v3_database_upgrades_to_v4_and_takes_the_moved_reason(tmp_path):
    old = _database_at(tmp_path, 3)
    url = f"sqlite:///{old}"
    lazy = JobService(None, tmp_path, lambda: datetime(2026, 2, 1, tzinfo=UTC), url=url)
    with lazy._lite() as lite:
        assert lite is None  # the light reader leaves a schema-3 store to Store, which migrates it
    store = Store(url)
    with store.write() as s:
        a = s.exec(select(Attempt)).one()
        s.add(Attempt(job_id=a.job_id, number=a.number + 1, provider="fake", region="r", zone="z", instance_type="x",
                      spot=True, status=AttemptStatus.ENDED, reason=TerminationReason.MOVED,
                      message="deadline policy moves to on-demand: ..."))
    with store.read() as s:
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION)
        reasons = [r.reason for r in s.exec(select(Attempt).order_by(Attempt.number))]
    assert reasons[-1] == TerminationReason.MOVED
    store.close()
    with sqlite3.connect(old) as db:  # stored by name, as every enum column
        assert db.execute("SELECT reason FROM attempt ORDER BY number DESC").fetchone() == ("MOVED",)
    # `status` reads the migrated store with sqlite3 alone, and shows the reason
    with lazy._lite() as lite:
        assert lite is not None
    job = JobService(None, tmp_path, lambda: datetime(2026, 2, 1, tzinfo=UTC), url=url).job(str(a.job_id))
    assert [x["reason"] for x in job["attempt_list"]][-1] == "moved"


def test_v4_database_upgrades_to_v5_with_volume_attached_at_on_attempt(tmp_path):
    old = _database_at(tmp_path, 4)
    url = f"sqlite:///{old}"
    assert "volume_attached_at" not in _columns(url)["attempt"]
    attached = datetime(2026, 2, 1, 12, 30, tzinfo=UTC)
    store = Store(url)
    with store.write() as s:
        a = s.exec(select(Attempt)).one()
        assert a.volume_attached_at is None
        a.volume_attached_at = attached
    with store.read() as s:
        assert s.exec(select(Attempt)).one().volume_attached_at == attached
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION) == "14"
    store.close()
    with sqlite3.connect(old) as db:  # running the step again (a half-applied migration) is harmless
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    Store(url).close()
    job = JobService(None, tmp_path, lambda: attached, url=url).job(str(a.job_id))  # the light reader too
    assert job["attempt_list"][0]["instance_id"] == "fake-1"


def test_v5_database_upgrades_to_v6_and_its_attempts_load_without_an_offer(tmp_path):
    old = _database_at(tmp_path, 5)
    url = f"sqlite:///{old}"
    assert "offer" not in _columns(url)["attempt"]
    store = Store(url)
    with store.write() as s:
        a = s.exec(select(Attempt)).one()
        assert a.offer is None and a.start_error is None  # an old row loads; a relaunch rebuilds its offer
        a.offer = '{"provider": "fake"}'
    with store.read() as s:
        assert s.exec(select(Attempt)).one().offer == '{"provider": "fake"}'
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION) == "14"
    store.close()


def test_v6_database_upgrades_to_v7_with_an_empty_heartbeat_table(tmp_path):
    from gpuorch.store.heartbeat import Beater, read_state
    from gpuorch.store.models import Heartbeat

    old = _database_at(tmp_path, 6)
    url = f"sqlite:///{old}"
    assert "heartbeat" not in _columns(url)
    store = Store(url)
    now = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
    assert read_state(store, now)["daemons"] == []
    Beater(store, "host/1/abc", 5.0, "0.1.0").started(now)
    with store.read() as s:
        assert s.get(Heartbeat, "host/1/abc").started_at == now
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION)
    store.close()
    fresh = tmp_path / "fresh.db"
    Store(f"sqlite:///{fresh}").close()
    assert _columns(url) == _columns(f"sqlite:///{fresh}")
    with sqlite3.connect(old) as db:  # running the step again (a half-applied migration) is harmless
        db.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    Store(url).close()


def test_v7_database_upgrades_to_v8_and_takes_held_and_pruned_trials(tmp_path):
    old = _database_at(tmp_path, 7)
    url = f"sqlite:///{old}"
    assert "objective_history" not in _columns(url)["job"] and "runway_until" not in _columns(url)["attempt"]
    store = Store(url)
    until = datetime(2026, 2, 1, 12, 30, tzinfo=UTC)
    with store.write() as s:
        a = s.exec(select(Attempt)).one()
        assert a.runway_until is None  # an old row loads: no runway, the horizon alone
        a.runway_until, a.reason = until, TerminationReason.HELD
        j = s.get(Job, a.job_id)
        j.status, j.objective_history = JobStatus.HELD, "[[50, 0.9]]"
    with store.read() as s:
        a = s.exec(select(Attempt)).one()
        assert (a.runway_until, a.reason) == (until, TerminationReason.HELD)
        assert s.get(Job, a.job_id).status == JobStatus.HELD
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION) == "14"
    store.close()
    with sqlite3.connect(old) as db:  # running the step again (a half-applied migration) is harmless
        db.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    Store(url).close()
    job = JobService(None, tmp_path, lambda: until, url=url).job(str(a.job_id))  # the light reader reads `held`
    assert job["status"] == "held" and job["attempt_list"][0]["reason"] == "held"


def test_v12_warm_instances_migrated_match_the_fresh_schema(tmp_path):
    """Schema 12's warm-instance table: migrated from 11, its columns and its partial unique index
    (one open idle period an instance) are those a fresh database gets."""
    from sqlalchemy import inspect as sa_inspect

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.executescript(V1.read_text())
    engine = create_engine(f"sqlite:///{old}")
    with engine.begin() as conn:
        migrate(conn, MIGRATIONS[:10])
        assert not sa_inspect(conn).has_table("warminstance")
        assert migrate(conn) == 14
        assert "kept_warm" in {c["name"] for c in sa_inspect(conn).get_columns("attempt")}
        migrated = {c["name"] for c in sa_inspect(conn).get_columns("warminstance")}
        indexes = {i["name"]: i["unique"] for i in sa_inspect(conn).get_indexes("warminstance")}
    engine.dispose()
    Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh = create_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    with fresh.connect() as conn:
        assert {c["name"] for c in sa_inspect(conn).get_columns("warminstance")} == migrated
    fresh.dispose()
    assert indexes["ux_warminstance_open"]
