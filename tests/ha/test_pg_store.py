"""The store's migrations and sqlmodel code on a real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DataError, IntegrityError
from sqlmodel import func, select

from gpuorch.store import Attempt, AttemptStatus, Event, Job, Meta, Store, TerminationReason
from gpuorch.store.migrations import SCHEMA_VERSION, SchemaTooNew, migrate

pytestmark = pytest.mark.postgres


def test_fresh_database_gets_the_schema_and_stamp(store):
    with store.read() as s:
        assert s.exec(text("SHOW transaction_isolation")).one()[0] == "read committed"
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION)
        tables = set(s.exec(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars())
    assert {"job", "attempt", "instance", "checkpoint", "event", "backoff", "meta"} <= tables


def test_concurrent_first_opens_migrate_once(pg_url):
    go, ids, errors = threading.Barrier(4), [], []

    def open_store() -> None:  # each thread its own engine and connections, as daemons would have
        go.wait()
        try:
            store = Store(pg_url)
            ids.append(store.installation_id)
            store.close()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(ids) == 4
    assert len(set(ids)) == 1  # one migrator made the schema and the installation id; the rest saw it
    with Store(pg_url).read() as s:
        assert s.exec(select(func.count()).select_from(Meta)).one() == 2


def test_reopening_keeps_data_and_installation_id(pg_url):
    first = Store(pg_url)
    with first.write() as s:
        s.add(Job(name="keep", spec="{}", created_at=datetime.now(UTC)))
    again = Store(pg_url)
    assert again.installation_id == first.installation_id
    with again.read() as s:
        assert [j.name for j in s.exec(select(Job))] == ["keep"]
    first.close()
    again.close()


def test_migrations_run_in_order_above_the_stamp(store):
    applied = []
    steps = [(2, "add column", lambda c: (c.execute(text("ALTER TABLE job ADD COLUMN extra TEXT")), applied.append(2))),
             (3, "noop", lambda c: applied.append(3))]
    with store._write.begin() as conn:  # pretend the database is at version 1
        conn.execute(text("UPDATE meta SET value = '1' WHERE key = 'schema_version'"))
        assert migrate(conn, steps) == 3
    with store._write.begin() as conn:
        migrate(conn, steps)
    assert applied == [2, 3]
    with store.read() as s:
        assert s.exec(text("SELECT count(extra) FROM job")).one()[0] == 0


def test_a_newer_schema_is_refused(pg_url):
    Store(pg_url).close()
    with Store(pg_url)._write.begin() as conn:
        conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION + 1)})
    with pytest.raises(SchemaTooNew, match="upgrade gpuorch"):
        Store(pg_url)


def test_datetimes_come_back_aware_utc(store):
    local = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    with store.write() as s:
        job = Job(name="t", spec="{}", created_at=local, lease_expires=local)
        s.add(job)
    with store.read() as s:
        back = s.get(Job, job.id)
    assert back.created_at == local and back.created_at.tzinfo == UTC and back.lease_expires.utcoffset() == timedelta(0)


def test_unique_violation_is_integrity_error_and_rolls_back(store):
    with store.write() as s:
        job = Job(name="t", spec="{}", created_at=datetime.now(UTC))
        s.add(job)
    row = dict(job_id=job.id, number=1, provider="fake", region="r", zone="z", instance_type="x")
    with store.write() as s:
        s.add(Attempt(**row))
    with pytest.raises(IntegrityError):
        with store.write() as s:
            s.add(Event(ts=datetime.now(UTC), kind="k", message="rolled back with the duplicate"))
            s.add(Attempt(**row))
    with store.read() as s:
        assert s.exec(select(func.count()).select_from(Attempt)).one() == 1
        assert s.exec(select(func.count()).select_from(Event)).one() == 0


V3_REASONS = ("SUCCEEDED", "FAILED", "PREEMPTED", "LOST", "NO_CAPACITY", "LAUNCH_FAILED", "CANCELLED",
              "BUDGET_EXHAUSTED")


def _labels(s) -> list[str]:
    return list(s.exec(text("SELECT unnest(enum_range(NULL::terminationreason))::text")).scalars())


def test_moved_is_refused_by_a_v3_enum_and_accepted_after_migration(pg_url):
    store = Store(pg_url)
    with store.write() as s:
        job = Job(name="old", spec="{}", created_at=datetime.now(UTC))
        s.add(job)
        s.flush()
        job_id = job.id
        s.add(Attempt(job_id=job_id, number=1, provider="fake", region="r", zone="z", instance_type="x",
                      status=AttemptStatus.ENDED, reason=TerminationReason.PREEMPTED))
    labels = ", ".join(f"'{x}'" for x in V3_REASONS)
    with store._write.begin() as conn:  # back to the shape schema 3 left: the native enum without MOVED
        for ddl in ("ALTER TYPE terminationreason RENAME TO terminationreason_v4",
                    f"CREATE TYPE terminationreason AS ENUM ({labels})",
                    "ALTER TABLE attempt ALTER COLUMN reason TYPE terminationreason"
                    " USING reason::text::terminationreason",
                    "DROP TYPE terminationreason_v4",
                    "UPDATE meta SET value = '3' WHERE key = 'schema_version'"):
            conn.execute(text(ddl))
    moved = dict(job_id=job_id, number=2, provider="fake", region="r", zone="z", instance_type="x", spot=True,
                 status=AttemptStatus.ENDED, reason=TerminationReason.MOVED, message="deadline policy moves")
    with pytest.raises(DataError):  # what a v3 database says to the new reason
        with store.write() as s:
            s.add(Attempt(**moved))
    store.close()

    upgraded = Store(pg_url)  # migrates 3 -> 4 and on (5 finds its column there already)
    with upgraded.read() as s:
        assert s.get(Meta, "schema_version").value == str(SCHEMA_VERSION)
        assert _labels(s) == [*V3_REASONS, "MOVED", "HELD", "PRUNED"]  # 4 adds MOVED, 8 the sweeps' two
    with upgraded.write() as s:
        s.add(Attempt(**moved))
    with upgraded.read() as s:
        rows = list(s.exec(select(Attempt).where(Attempt.job_id == job_id).order_by(Attempt.number)))
    assert [r.reason for r in rows] == [TerminationReason.PREEMPTED, TerminationReason.MOVED]
    upgraded.close()
    again = Store(pg_url)  # reopening runs nothing twice (ADD VALUE IF NOT EXISTS would not fail anyway)
    with again.read() as s:
        assert _labels(s).count("MOVED") == 1
    again.close()


def test_a_fresh_database_has_every_reason(store):
    with store.read() as s:
        assert _labels(s) == [r.name for r in TerminationReason]


def test_heartbeats_and_lease_holders_on_postgres(store):
    from gpuorch.store.heartbeat import Beater, read_state

    now = datetime(2026, 3, 1, 8, tzinfo=UTC)
    Beater(store, "a/1/x", 5.0, "t").started(now)
    b = Beater(store, "b/2/y", 5.0, "t")
    b.started(now)
    b.passed(now + timedelta(seconds=1), "ok")
    with store.write() as s:
        s.add(Job(name="j", spec="{}", created_at=now, lease_owner="b/2/y", lease_expires=now + timedelta(minutes=1)))
    state = read_state(store, now + timedelta(seconds=2))
    assert state["alive"] and state["last_pass_at"] == now + timedelta(seconds=1)
    assert {d["owner"]: d["jobs_held"] for d in state["daemons"]} == {"a/1/x": 0, "b/2/y": 1}
