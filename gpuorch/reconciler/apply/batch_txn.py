"""One write transaction for a batch of jobs: the queue drain's launches (launching.py).

``Reconciler._txn`` locks one job's row and checks its lease; a drain of thousands of queued
jobs paid a ``BEGIN IMMEDIATE`` and a commit (an fsync'd WAL write) per job and per step. Here
the jobs' rows are read in one ``SELECT`` whose ``WHERE`` is the lease check (this daemon's
owner, a lease expiry later than now), locked ``FOR UPDATE`` on PostgreSQL (SQLite's ``BEGIN
IMMEDIATE`` serialises every writer anyway), and handed over by id (no ORM row: a job row
carries its spec): a job whose lease is lost is simply absent, and the caller drops its work (as
``LeaseLost`` does for one job). The rows' caches are dropped first, as ``_txn`` does: the next
pass reads what this writes.

A job row is wide (it carries its spec) and every ``UPDATE`` of it writes the whole row again
(PostgreSQL: a new row version, its WAL; the drain's largest server cost), so a batch writes each
held row once at most: the closing ``updated_at`` leaves out the jobs ``versioned`` names, those a
statement of the transaction set ``updated_at`` on already (the intents' status) and those whose
rows the transaction does not write (the launched records: attempt rows only). The lease check
stays the opening ``SELECT ... FOR UPDATE`` either way: the rows are locked until commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TypeVar

from sqlalchemy import ColumnElement, update
from sqlmodel import Session, col, select

from gpuorch.clock import Clock
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store import Store
from gpuorch.store.models import Job

T = TypeVar("T")
CHUNK = 500  # ids per IN list (well under every database's bound-parameter limit)

TxnIds = Callable[[Sequence[int]], AbstractContextManager[tuple[Session, set[int]]]]
VERSIONED = "gpuorch.batch_txn.versioned"  # Session.info key: ids the closing UPDATE leaves out


def versioned(s: Session, job_ids: Iterable[int]) -> None:
    """In a ``BatchTxn`` transaction ``s``: these jobs need no closing ``updated_at`` (a statement
    of ``s`` set it already, or ``s`` writes nothing on their rows)."""
    s.info.setdefault(VERSIONED, set()).update(job_ids)


def chunks(ids: Sequence[T]) -> Iterator[Sequence[T]]:
    """``ids`` in slices of at most ``CHUNK``."""
    for k in range(0, len(ids), CHUNK):
        yield ids[k:k + CHUNK]


class BatchTxn:
    def __init__(self, store: Store, leases: Leases, clock: Clock, drop: Callable[[int], None]) -> None:
        self.store, self.leases, self.clock, self.drop = store, leases, clock, drop

    def _held(self, chunk: Sequence[int], now: datetime) -> tuple[ColumnElement[bool], ...]:
        """The lease check, as a ``WHERE``: these jobs, held by this daemon at ``now``."""
        return col(Job.id).in_(chunk), col(Job.lease_owner) == self.leases.owner, col(Job.lease_expires) > now

    @contextmanager
    def __call__(self, job_ids: Sequence[int]) -> Iterator[tuple[Session, set[int]]]:
        """A write transaction over the jobs of ``job_ids`` this daemon still holds: their ids,
        read by the lease check (Core, no ORM row: a job row carries its spec; a caller that
        needs one gets it with ``Session.get``, locked already), and their ``updated_at`` set in
        one ``UPDATE`` per chunk at the end, except those ``versioned`` names."""
        for job_id in job_ids:
            self.drop(job_id)
        with self.store.write() as s:
            now = self.clock.now()
            ids = sorted(set(job_ids))
            held: set[int] = set()
            for chunk in chunks(ids):
                held.update(i for i in s.exec(select(col(Job.id)).where(*self._held(chunk, now)).with_for_update())
                            if i is not None)
            yield s, held
            t = self.clock.now()
            for chunk in chunks(sorted(held - s.info.pop(VERSIONED, set()))):
                s.execute(update(Job).where(col(Job.id).in_(chunk)).values(updated_at=t)
                          .execution_options(synchronize_session=False))

    def held_ids(self, job_ids: Sequence[int], now: datetime) -> set[int]:
        """Which of ``job_ids`` this daemon still holds: the lease check of a batch of side effects
        that write nothing (``Leases.check`` for one job), in one read."""
        ids = sorted(set(job_ids))
        out: set[int] = set()
        with self.store.read() as s:
            for chunk in chunks(ids):
                out.update(i for i in s.exec(select(col(Job.id)).where(*self._held(chunk, now))) if i is not None)
        return out
