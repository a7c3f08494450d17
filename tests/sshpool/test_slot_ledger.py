"""The slot ledger in the state store (schema 11, ``slotlease``): a held slot has one holder
whoever writes it (the partial unique index, and racing writers on one SQLite file), a token's
lease is found again, released slots come free, tombstones are pruned; the migration from
schema 10 makes the same table."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from gpuorch.clock import utcnow
from gpuorch.errors import NoCapacityError
from gpuorch.provider.slots import SlotRequest
from gpuorch.store import Store
from gpuorch.store.migrations import MIGRATIONS, migrate
from gpuorch.store.models import SlotLease
from gpuorch.store.slots import StoreSlotLedger
from tests.ha.conftest import pg_server, pg_url  # noqa: F401  (the PostgreSQL fixtures)

pytestmark = pytest.mark.sshpool


def request(token: str, count: int = 1, candidates: tuple[int, ...] = (0, 1), host: str = "h:22") -> SlotRequest:
    return SlotRequest(token=token, host=host, candidates=candidates, count=count, zone="h", region="pool",
                       instance_type=f"A100-80GBx{count}", tags={"gpuorch:job": token})


def test_a_token_gets_its_lease_back_and_a_full_host_refuses(store: Store):
    ledger = StoreSlotLedger(store, "ssh")
    first = ledger.acquire(request("t1"), utcnow())
    assert ledger.acquire(request("t1"), utcnow()) == first  # idempotent: nothing new leased
    second = ledger.acquire(request("t2"), utcnow())
    assert {first.slots, second.slots} == {(0,), (1,)}
    with pytest.raises(NoCapacityError):
        ledger.acquire(request("t3"), utcnow())
    assert ledger.get("t3") is None
    ledger.end("t1", utcnow(), "terminated")
    with pytest.raises(NoCapacityError):  # ended, but its processes may still run: still held
        ledger.acquire(request("t3"), utcnow())
    ledger.release("t1", utcnow())
    assert ledger.acquire(request("t3"), utcnow()).slots == first.slots
    assert ledger.acquire(request("t1"), utcnow()).released_at is not None  # the tombstone answers its token
    assert StoreSlotLedger(store, "other").get("t1") is None  # one provider's leases only


def test_released_leases_are_pruned_after_their_time(store: Store):
    ledger = StoreSlotLedger(store, "ssh")
    ledger.acquire(request("t1", count=2), utcnow())
    ledger.release("t1", utcnow())
    ledger.prune(utcnow() - timedelta(hours=1))
    assert ledger.get("t1") is not None
    ledger.prune(utcnow() + timedelta(seconds=1))
    assert ledger.get("t1") is None and ledger.leases() == []


def test_the_index_refuses_a_second_holder_of_a_held_slot(store: Store):
    now = utcnow()
    row = {"provider": "ssh", "host": "h:22", "slot": 0, "zone": "h", "region": "pool", "instance_type": "x",
           "tags": "{}", "created_at": now}
    with store.write() as s:
        s.add(SlotLease(token="a", **row))
    with pytest.raises(IntegrityError), store.write() as s:
        s.add(SlotLease(token="b", **row))
    with store.write() as s:  # released: the slot is free for the next holder
        s.exec(text("UPDATE slotlease SET released_at = created_at"))  # type: ignore[call-overload]
        s.add(SlotLease(token="b", **row))


def test_racing_writers_on_one_database_never_share_a_slot(tmp_path: Path):
    """Eight launches from eight threads and two Store objects (two daemons) for a 3-slot host."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    stores = [Store(url), Store(url)]
    got: list[tuple[int, ...]] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def launch(i: int) -> None:
        ledger = StoreSlotLedger(stores[i % 2], "ssh")
        start.wait()
        try:
            got.append(ledger.acquire(request(f"t{i}", candidates=(0, 1, 2)), utcnow()).slots)
        except NoCapacityError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [(0,), (1,), (2,)] and len(refused) == 5
    for s in stores:
        s.close()


def test_schema_10_migrates_to_the_slot_table_with_its_index(tmp_path: Path):
    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as conn:
        migrate(conn)  # then back to what schema 10 left: no slot table, stamped 10
        conn.execute(text("DROP TABLE slotlease"))
        conn.execute(text("UPDATE meta SET value = '10' WHERE key = 'schema_version'"))
        assert 11 in [m[0] for m in MIGRATIONS]  # later schemas migrate after it
    with engine.begin() as conn:
        assert migrate(conn) == MIGRATIONS[-1][0]
        indexes = {i["name"]: i for i in inspect(conn).get_indexes("slotlease")}
        assert indexes["ux_slotlease_held"]["unique"]
    engine.dispose()
    store = Store(f"sqlite:///{tmp_path / 'old.db'}")
    ledger = StoreSlotLedger(store, "ssh")
    ledger.acquire(request("t1", count=2), utcnow())
    with pytest.raises(NoCapacityError):
        ledger.acquire(request("t2"), utcnow())
    store.close()


@pytest.mark.postgres
def test_racing_daemons_on_postgresql_never_share_a_slot(pg_url: str):  # noqa: F811  (the fixture)
    """The same race on PostgreSQL (HA daemons on several hosts): the partial unique index decides,
    the loser of a slot looks again and takes another or is refused."""
    stores = [Store(pg_url), Store(pg_url)]
    got: list[tuple[int, ...]] = []
    refused: list[str] = []
    start = threading.Barrier(6)

    def launch(i: int) -> None:
        ledger = StoreSlotLedger(stores[i % 2], "ssh")
        start.wait()
        try:
            got.append(ledger.acquire(request(f"t{i}", count=2, candidates=(0, 1, 2, 3, 4)), utcnow()).slots)
        except NoCapacityError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    slots = [s for lease in got for s in lease]
    assert len(got) == 2 and len(refused) == 4 and len(slots) == len(set(slots)) == 4
    for s in stores:
        s.close()
