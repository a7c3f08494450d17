"""The instance table's mirror: two daemons recording the same new instance at once, and more
instances than one IN list holds."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

from sqlalchemy import event
from sqlmodel import select

from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler.apply.mirror import InstanceMirror
from gpuorch.store import Store
from gpuorch.store.models import Instance as InstanceRow

INST = Instance(id="fake-1", provider="fake", region="r1", zone="r1-a", instance_type="gpu.a100", spot=True,
                state=InstanceState.RUNNING)
OBSERVED = {("fake", 1, 1): INST}


def test_a_row_written_by_another_daemon_between_read_and_write_does_not_fail_the_pass(store, clock, tmp_path):
    other_store = Store(f"sqlite:///{tmp_path / 'state.db'}")  # the other daemon's connection
    other = InstanceMirror(other_store)
    ours = InstanceMirror(store)
    real_write = store.write

    @contextmanager
    def other_daemon_first():  # the other daemon commits the same new row after our read
        other.update(OBSERVED, {"fake"}, set(), clock.now())
        with real_write() as s:
            yield s

    store.write = other_daemon_first  # type: ignore[method-assign]
    ours.update(OBSERVED, {"fake"}, set(), clock.now())  # must not raise
    store.write = real_write  # type: ignore[method-assign]

    clock.advance(1)
    gone = Instance(**{**INST.model_dump(), "state": InstanceState.TERMINATED})
    ours.update({("fake", 1, 1): gone}, {"fake"}, set(), clock.now())  # reads the table again: updates the row
    with store.read() as s:
        [row] = s.exec(select(InstanceRow)).all()
    assert (row.instance_id, row.state, row.job_id) == ("fake-1", "terminated", 1)
    assert row.terminated_at is not None
    other_store.close()


def test_more_instances_than_one_in_list_holds_are_mirrored_and_ended(store, clock, monkeypatch):
    import gpuorch.reconciler.apply.mirror as mirror

    monkeypatch.setattr(mirror, "CHUNK", 3, raising=False)  # the real one (500) in miniature: 30 ids, ten IN lists
    for engine in (store._read, store._write):  # and SQLite's bound-parameter limit (32,766) as well
        event.listen(engine, "connect", lambda conn, _: conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20))
        engine.dispose()
    observed = {("fake", j, 1): Instance(**{**INST.model_dump(), "id": f"fake-{j}"}) for j in range(30)}
    m = InstanceMirror(store, refresh_s=60)
    m.update(observed, {"fake"}, set(), clock.now())
    clock.advance(61)  # a full read of the table
    del observed[("fake", 4, 1)]  # gone from the listing
    observed[("fake", 7, 1)] = Instance(**{**INST.model_dump(), "id": "fake-7", "state": InstanceState.TERMINATED})
    m.update(observed, {"fake"}, set(), clock.now())
    with store.read() as s:
        rows = {r.instance_id: r for r in s.exec(select(InstanceRow))}
    assert len(rows) == 30
    assert {i for i, r in rows.items() if r.terminated_at is not None} == {"fake-4", "fake-7"}
    assert (rows["fake-4"].state, rows["fake-7"].state, rows["fake-0"].state) == ("gone", "terminated", "running")


def test_between_full_reads_only_what_the_listing_changed_is_looked_at(store, clock):
    """The listing compared by identity with the last one (issue 18: a drain's passes each listed
    thousands of unchanged instances): a changed state, a new instance, an instance gone and one
    replaced under its key each reach the table, and only their rows are read."""
    observed = {("fake", j, 1): Instance(**{**INST.model_dump(), "id": f"fake-{j}"}) for j in range(6)}
    m = InstanceMirror(store, refresh_s=600)
    m.update(dict(observed), {"fake"}, set(), clock.now())
    asked: list[list[str]] = []  # the instance ids of each read of the table

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().startswith("SELECT") and "FROM instance" in statement:
            asked.append(sorted(p for p in params if isinstance(p, str)))

    event.listen(store._read, "before_cursor_execute", record)
    clock.advance(2)
    observed[("fake", 1, 1)] = Instance(**{**INST.model_dump(), "id": "fake-1", "state": InstanceState.TERMINATED})
    observed[("fake", 9, 1)] = Instance(**{**INST.model_dump(), "id": "fake-9"})  # new
    del observed[("fake", 2, 1)]  # gone from the listing
    observed[("fake", 3, 1)] = Instance(**{**INST.model_dump(), "id": "fake-3b"})  # another instance, same key
    m.update(dict(observed), {"fake"}, set(), clock.now())
    assert asked == [["fake-1", "fake-2", "fake-3", "fake-3b", "fake-9"]]
    with store.read() as s:
        rows = {r.instance_id: (r.state, r.terminated_at is not None) for r in s.exec(select(InstanceRow))}
    assert rows == {"fake-0": ("running", False), "fake-1": ("terminated", True), "fake-2": ("gone", True),
                    "fake-3": ("gone", True), "fake-3b": ("running", False), "fake-4": ("running", False),
                    "fake-5": ("running", False), "fake-9": ("running", False)}
    asked.clear()
    m.update(dict(observed), {"fake"}, set(), clock.now())  # the same objects: nothing read
    assert asked == []
