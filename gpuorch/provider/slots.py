"""Slot leases: how an adapter for capacity the user owns (SSH node pools) shares it between
daemons without oversubscribing a host.

A host has GPU slots (its GPU indexes). A launch leases some of them for its client token in the
state store, the one thing every daemon of an installation shares (HA daemons on other hosts
too): a file lock on this host would not stop a daemon elsewhere. The port is here, in the adapter
kit; the store implements it (``gpuorch.store.slots``) and the daemon hands it to each provider
that asks (``UsesSlotLedger``), since an adapter never imports the store.

Lease rows live past their instance: ``ended_at`` says the instance is over (terminated, or its
host went silent) while its slots stay held until the adapter has seen the host free of its
processes (``release``); a released row stays as a tombstone (the client token then still names
its instance) until ``prune``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SlotLease:
    """The slots one client token holds on one host (one instance of an owned-capacity adapter)."""

    token: str
    host: str  # the host's key in its pool (``host:port``), the same for every daemon
    slots: tuple[int, ...]
    zone: str
    region: str
    instance_type: str
    created_at: datetime
    tags: dict[str, str] = field(default_factory=dict)
    ended_at: datetime | None = None  # the instance is over; its slots are held until released
    end_reason: str | None = None
    released_at: datetime | None = None  # its host was seen free of its processes: slots free again


@dataclass(frozen=True)
class SlotRequest:
    """What ``SlotLedger.acquire`` leases: ``count`` of ``candidates`` on ``host`` for ``token``."""

    token: str
    host: str
    candidates: Sequence[int]  # the slot numbers this offer may take (a host's GPUs of one model)
    count: int
    zone: str
    region: str
    instance_type: str
    tags: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class SlotLedger(Protocol):
    """Leases in the state store, for one provider name. Every method is one transaction."""

    def acquire(self, request: SlotRequest, now: datetime) -> SlotLease:
        """Lease ``request.count`` free slots of ``request.candidates`` for ``request.token``.

        Idempotent by token: a token that holds (or held) a lease gets that lease back, whatever
        its state, and nothing new is leased. A slot is free when no unreleased lease holds it;
        two daemons racing for one slot never both get it (a unique index on the unreleased rows).
        Raises ``gpuorch.errors.NoCapacityError`` when fewer than ``count`` are free.
        """
        ...

    def get(self, token: str) -> SlotLease | None:
        """The lease of ``token`` (tombstones included), or None."""
        ...

    def leases(self) -> list[SlotLease]:
        """Every lease of this provider, ended and released ones included until pruned."""
        ...

    def end(self, token: str, now: datetime, reason: str) -> None:
        """Mark the instance over (slots still held); quiet if unknown or already ended."""
        ...

    def release(self, token: str, now: datetime) -> None:
        """Free the slots of an ended lease; quiet if unknown or already released."""
        ...

    def prune(self, before: datetime) -> None:
        """Forget leases released before ``before``."""
        ...


@runtime_checkable
class UsesSlotLedger(Protocol):
    """An adapter that leases slots: the daemon calls ``use_slot_ledger`` once, after building it
    and before its first pass, with a ledger on the daemon's own store for the adapter's name
    (``gpuorch.store.slots.bind_slot_ledgers``)."""

    def use_slot_ledger(self, ledger: SlotLedger) -> None: ...
