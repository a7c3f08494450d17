"""``gpuorch.store.bulk.insert_rows`` on a real PostgreSQL (``COPY``) and on SQLite (executemany):
the rows read back through the ORM exactly as those a Core ``INSERT`` wrote (aware UTC datetimes,
enums, left-out columns at their defaults, NULLs, quotes and tabs in text), and a duplicate key
raises SQLAlchemy's ``IntegrityError``, rolling back the whole transaction."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.store import Store
from gpuorch.store.bulk import insert_rows
from gpuorch.store.models import Attempt, AttemptStatus, Event, Instance

pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg is in it)")

SPEC = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}})
NOW = datetime(2026, 12, 6, 7, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture(params=["postgres", "sqlite"])
def any_store(request, tmp_path):
    if request.param == "postgres":
        yield request.getfixturevalue("store")
        return
    s = Store(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


def _attempt(job_id: int, number: int) -> dict[str, object]:
    # status, gpu_count, price_per_hour ... left out: their defaults
    return {"job_id": job_id, "number": number, "provider": "sim", "region": "us-east-1", "zone": "us-east-1a",
            "instance_type": "p4d", "spot": True, "requested_at": NOW, "offer": '{"a": "b\\tc"}',
            "message": None}


def _shape(rows: list, drop: tuple[str, ...]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.model_dump().items() if k not in drop} for r in rows]


def test_rows_read_back_as_an_insert_wrote_them(any_store):
    a, b = (jobs.submit(any_store, SPEC, NOW).id for _ in range(2))
    events = [{"ts": NOW, "job_id": j, "attempt": 1, "kind": "launch_requested", "data": None,
               "message": "sim us-east-1a p4d spot at $1.000/h, \"quoted\"\tand tabbed \\ back"} for j in (a, b)]
    inst = {"provider": "sim", "job_id": None, "attempt": 1, "state": "running", "first_seen": NOW,
            "last_seen": NOW, "terminated_at": None}
    with any_store.write() as s:
        insert_rows(s, Attempt.__table__, [_attempt(a, 1)])
        s.execute(insert(Attempt.__table__), [_attempt(b, 1)])
        insert_rows(s, Event.__table__, events[:1])
        s.execute(insert(Event.__table__), events[1:])
        insert_rows(s, Instance.__table__, [{**inst, "instance_id": "i-a"}])
        s.execute(insert(Instance.__table__), [{**inst, "instance_id": "i-b"}])
    with any_store.read() as s:
        attempts = list(s.exec(select(Attempt).order_by(col(Attempt.id))))
        got_events = list(s.exec(select(Event).where(col(Event.kind) == "launch_requested").order_by(col(Event.id))))
        instances = list(s.exec(select(Instance).order_by(col(Instance.id))))
    assert attempts[0].status is AttemptStatus.REQUESTED and attempts[0].requested_at == NOW
    assert _shape(attempts[:1], ("id", "job_id")) == _shape(attempts[1:], ("id", "job_id"))
    assert [e.job_id for e in got_events] == [a, b] and got_events[0].ts == NOW
    assert _shape(got_events[:1], ("id", "job_id")) == _shape(got_events[1:], ("id", "job_id"))
    assert _shape(instances[:1], ("id", "instance_id")) == _shape(instances[1:], ("id", "instance_id"))


def test_a_duplicate_key_is_an_integrity_error_and_nothing_is_written(any_store):
    job_id = jobs.submit(any_store, SPEC, NOW).id
    with any_store.write() as s:
        insert_rows(s, Attempt.__table__, [_attempt(job_id, 1)])
    with pytest.raises(IntegrityError), any_store.write() as s:
        insert_rows(s, Event.__table__, [{"ts": NOW, "job_id": job_id, "attempt": 2, "kind": "x", "message": "m",
                                          "data": None}])
        insert_rows(s, Attempt.__table__, [_attempt(job_id, 2), _attempt(job_id, 1)])
    with any_store.read() as s:
        assert [a.number for a in s.exec(select(Attempt))] == [1]
        assert list(s.exec(select(Event).where(col(Event.kind) == "x"))) == []


def test_nothing_to_insert_is_no_statement(any_store):
    with any_store.write() as s:
        insert_rows(s, Event.__table__, [])
    with any_store.read() as s:
        assert list(s.exec(select(Event).where(col(Event.kind) == "x"))) == []


def test_among_selects_the_ids_given_in_one_statement_or_in_chunks(any_store):
    from sqlalchemy import event

    from gpuorch.store.bulk import among, among_chunks
    from gpuorch.store.models import Job

    ids = [jobs.submit(any_store, SPEC, NOW).id for _ in range(7)]
    wanted = [ids[0], ids[3], ids[6], 10**6]  # one id that no job has
    with any_store.read() as s:
        assert sorted(s.exec(select(col(Job.id)).where(among(col(Job.id), wanted, any_store.dialect)))) == \
            sorted(wanted[:3])
        assert list(s.exec(select(col(Job.id)).where(among(col(Job.id), [], any_store.dialect)))) == []
        seen: list[str] = []
        event.listen(s.get_bind(), "before_cursor_execute", lambda *a: seen.append(a[2]))
        conds = list(among_chunks(col(Job.id), ids, any_store.dialect, chunk=3))
        got = sorted(i for c in conds for i in s.exec(select(col(Job.id)).where(c)))
    assert got == sorted(ids)
    # PostgreSQL: one statement, the ids in one array parameter; SQLite: an IN list a chunk
    assert len(conds) == (1 if any_store.dialect == "postgresql" else 3)
    assert all(("ANY" in q) == (any_store.dialect == "postgresql") for q in seen)
    assert list(among_chunks(col(Job.id), [], any_store.dialect)) == []
