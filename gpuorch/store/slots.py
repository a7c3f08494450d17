"""``StoreSlotLedger``: the slot leases of owned hosts in the state store (``models.SlotLease``),
the ``gpuorch.provider.slots.SlotLedger`` port. Every daemon of an installation, on this host or
another, shares the store, so its partial unique index keeps a slot to one holder."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from gpuorch.errors import NoCapacityError
from gpuorch.provider.slots import SlotLease, SlotLedger, SlotRequest, UsesSlotLedger
from gpuorch.store.db import Store
from gpuorch.store.models import Backoff
from gpuorch.store.models import SlotLease as Row

# A lost race for a slot (another daemon's insert won) is tried again this often on fresh rows.
_RACE_TRIES = 5


class StoreSlotLedger(SlotLedger):
    """The leases of provider ``provider`` in ``store``. Writes of leases do not wake the daemons
    (nothing that watches the store's changes reads this table); a release lifts the provider's
    back-offs, which wakes them."""

    def __init__(self, store: Store, provider: str) -> None:
        self.store, self.provider = store, provider

    def acquire(self, request: SlotRequest, now: datetime) -> SlotLease:
        for _ in range(_RACE_TRIES):
            try:
                with self.store.write_unwatched() as s:
                    held = self._rows(s, request.token)
                    if held:
                        return _lease(held)
                    taken = set(s.exec(select(Row.slot).where(
                        Row.provider == self.provider, Row.host == request.host,
                        col(Row.released_at).is_(None))).all())
                    free = [slot for slot in request.candidates if slot not in taken]
                    if len(free) < request.count:
                        raise NoCapacityError(
                            f"{request.host}: {len(free)} of {len(request.candidates)} slots free, "
                            f"{request.count} wanted", code="SlotsTaken")
                    tags = json.dumps(dict(request.tags), sort_keys=True)
                    rows = [Row(provider=self.provider, token=request.token, host=request.host, slot=slot,
                                zone=request.zone, region=request.region, instance_type=request.instance_type,
                                tags=tags, created_at=now) for slot in sorted(free)[:request.count]]
                    s.add_all(rows)
                    s.flush()
                    return _lease(rows)
            except IntegrityError:
                continue  # another daemon took one of those slots meanwhile: look again
        raise NoCapacityError(f"{request.host}: slots taken by other daemons while leasing; try again",
                              code="SlotsTaken")

    def get(self, token: str) -> SlotLease | None:
        with self.store.read() as s:
            rows = self._rows(s, token)
        return _lease(rows) if rows else None

    def leases(self) -> list[SlotLease]:
        with self.store.read() as s:
            rows = s.exec(select(Row).where(Row.provider == self.provider).order_by(col(Row.id))).all()
        return [_lease(group) for group in _by_token(rows).values()]

    def end(self, token: str, now: datetime, reason: str) -> None:
        with self.store.write_unwatched() as s:
            for row in self._rows(s, token):
                if row.ended_at is None:
                    row.ended_at, row.end_reason = now, reason[:500]
                    s.add(row)

    def release(self, token: str, now: datetime) -> None:
        """Free the slots, and lift this provider's offer back-offs: a launch that found a host
        full backed its offer class off, and a job waiting for owned capacity is to be launched at
        the daemons' next pass, not after the back-off's length (docs/ssh-pools.md). That write is
        a change the daemons watch (``Store.data_version``): they read the back-offs again."""
        released = False
        with self.store.write_unwatched() as s:
            for row in self._rows(s, token):
                if row.released_at is None:
                    row.ended_at = row.ended_at or now
                    row.end_reason = row.end_reason or "released"
                    row.released_at = now
                    s.add(row)
                    released = True
        if released:
            with self.store.write() as s:
                mine = col(Backoff.key).startswith(f"{self.provider}/", autoescape=True)
                for backoff in s.exec(select(Backoff).where(mine)).all():
                    s.delete(backoff)

    def prune(self, before: datetime) -> None:
        with self.store.write_unwatched() as s:
            for row in s.exec(select(Row).where(Row.provider == self.provider,
                                                col(Row.released_at).is_not(None),
                                                col(Row.released_at) < before)).all():
                s.delete(row)

    def _rows(self, s: Any, token: str) -> list[Row]:
        return list(s.exec(select(Row).where(Row.provider == self.provider, Row.token == token)
                           .order_by(col(Row.slot))).all())


def _by_token(rows: Iterable[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(row.token, []).append(row)
    return out


def _lease(rows: list[Row]) -> SlotLease:
    first = rows[0]
    return SlotLease(
        token=first.token, host=first.host, slots=tuple(sorted(r.slot for r in rows)), zone=first.zone,
        region=first.region, instance_type=first.instance_type, created_at=first.created_at,
        tags=json.loads(first.tags or "{}"), ended_at=first.ended_at, end_reason=first.end_reason,
        released_at=first.released_at)


def bind_slot_ledgers(providers: Mapping[str, Any], store: Store) -> None:
    """Hand each provider that leases slots (``UsesSlotLedger``) its ledger on ``store``: called by
    the daemon's assembly once its providers are built, before any wrapper and any pass."""
    for name, provider in providers.items():
        if isinstance(provider, UsesSlotLedger):
            provider.use_slot_ledger(StoreSlotLedger(store, name))
