"""The store's change signal (store/wake.py): a submit wakes the daemons sleeping on the store.

Real SQLite files and FIFOs; a real PostgreSQL (127.0.0.1:5432, a throwaway database) when one
answers, else those tests are skipped with the reason.
"""

from __future__ import annotations

import select
import uuid

import pytest

from gpuorch.store import Store, wake


def woken(listener: wake.Listener) -> bool:
    readable, _, _ = select.select([listener], [], [], 0)
    return bool(readable)


def test_a_notify_wakes_the_sqlite_listener_and_a_drain_clears_it(store):
    listener = wake.listen(store)
    assert listener is not None
    try:
        assert not woken(listener)
        wake.notify(store)
        wake.notify(store)
        assert woken(listener)
        assert listener.drain()
        assert not woken(listener)  # two notifies, one wake-up: the next pass sees both jobs
    finally:
        listener.close()


def test_a_notify_with_no_daemon_listening_does_nothing(store, tmp_path):
    wake.notify(store)  # no FIFO yet: nothing made
    assert not (tmp_path / "state.db.wake").exists()
    listener = wake.listen(store)
    assert listener is not None
    listener.close()
    wake.notify(store)  # a FIFO nobody reads: neither blocks nor raises
    for _ in range(100_000):  # nor does a full pipe
        wake.notify(Store(store.url) if _ == 0 else store)


def test_a_file_in_the_fifos_place_is_never_written_and_means_no_signal(store, tmp_path):
    taken = tmp_path / "state.db.wake"
    taken.write_text("someone's file\n")
    assert wake.listen(store) is None
    wake.notify(store)
    assert taken.read_text() == "someone's file\n"


def test_an_in_memory_database_has_no_signal():
    s = Store("sqlite:///:memory:")
    assert wake.listen(s) is None
    wake.notify(s)


@pytest.fixture
def pg_store():
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True,
                                connect_timeout=3)
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL on 127.0.0.1:5432 ({e}); run scripts/test-services.sh")
    name = f"gpuorch_w_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    s = Store(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
    yield s
    s.close()
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def test_a_postgres_notify_wakes_every_daemon_listening(pg_store):
    first, second = wake.listen(pg_store), wake.listen(pg_store)
    assert first is not None and second is not None
    try:
        assert not woken(first) and not woken(second)
        wake.notify(pg_store)
        for listener in (first, second):  # delivered at commit; select waits for it
            readable, _, _ = select.select([listener], [], [], 30)
            assert readable and listener.drain()
        assert not woken(first) and not woken(second)
    finally:
        first.close()
        second.close()
