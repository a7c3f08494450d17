"""The ``instance`` table: what gpuorch last observed of each instance it launched, for people
(``gpuorch status``, ``doctor``) and for the record. Written only when something changed.

The mirror remembers the state it last read or wrote for each row, so a pass in which no
instance changed reads and writes nothing; only the rows of instances whose state moved (or that
vanished from a provider listed fine) are read and written. Between full reads, when the same
providers listed fine as at the last update, only the listing's new objects and the instances it
no longer lists are looked at: an ``Instance`` is a frozen value, so a changed one is a new
object and the same object is the same value (change is a value, DESIGN.md 4; a provider that
lists a new object for an unchanged instance only costs a look). Every
``refresh_s`` it reads the whole table again, which also picks up rows another daemon wrote
meanwhile.
"""

from __future__ import annotations

import logging
from datetime import datetime
from operator import is_
from typing import cast

from sqlalchemy import Table, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from gpuorch.provider.port import Instance
from gpuorch.reconciler.apply.batch_txn import CHUNK
from gpuorch.store import Store
from gpuorch.store.bulk import insert_rows
from gpuorch.store.models import Instance as InstanceRow

INSTANCES = cast(Table, InstanceRow.__table__)  # type: ignore[attr-defined]

log = logging.getLogger("gpuorch.reconciler")

Key = tuple[str, str]  # (provider, instance id)


class InstanceMirror:
    def __init__(self, store: Store, refresh_s: float = 60.0) -> None:
        self.store, self.refresh_s = store, refresh_s
        self._known: dict[Key, tuple[str, bool]] = {}  # -> (state, terminated) as in the table
        self._read_at: datetime | None = None
        self._last: tuple[dict[tuple[str, int, int], Instance], set[str]] | None = None  # what the last update saw

    def update(self, observed: dict[tuple[str, int, int], Instance], ok: set[str], terminated: set[str],
               now: datetime) -> None:
        """``observed``: what the providers listed this pass; ``ok``: the providers listed fine
        (an instance missing from their listing is gone); ``terminated``: instance ids this pass
        terminated (``observed`` predates that)."""
        full = self._read_at is None or (now - self._read_at).total_seconds() >= self.refresh_s
        if not full and not terminated and self._unchanged(observed, ok):
            return  # the very instances the table already holds, as they were: nothing to read or write
        seen, gone = self._seen(observed, ok, terminated, full)
        want = {key: "terminating" if inst.id in terminated else inst.state.value for key, (_, inst) in seen.items()}
        if full:
            suspects = set(seen)
        else:
            suspects = self._suspects(seen, want, gone, ok)
            if not suspects:
                self._last = (dict(observed), set(ok)) if not terminated else None
                return
        rows = self._read(suspects, full)
        if full:
            self._known, self._read_at = {}, now
        added, changed, known = self._changes(rows, seen, want, suspects, ok, full, now)
        if (added or changed) and not self._write(added, changed):
            return
        self._known.update(known)
        self._last = (dict(observed), set(ok)) if not terminated else None

    def _seen(self, observed: dict[tuple[str, int, int], Instance], ok: set[str], terminated: set[str],
              full: bool) -> tuple[dict[Key, tuple[tuple[str, int, int], Instance]], set[Key] | None]:
        """The instances to look at, by (provider, instance id), and those the listing lost since the
        last update (None: every row not ended is looked at)."""
        last = self._last
        if full or terminated or last is None or last[1] != ok:
            return {(k[0], inst.id): (k, inst) for k, inst in observed.items()}, None
        # Only what changed in the listing since the table was brought up to date (an Instance is frozen:
        # any change is a new object): the instances it listed then and not now, and new objects.
        before = last[0]
        moved = [(k, inst) for k, inst in observed.items() if before.get(k) is not inst]
        lost = [(k, before[k]) for k in before.keys() - observed.keys()]
        lost += [(k, was) for k, inst in moved if (was := before.get(k)) is not None and was.id != inst.id]
        return {(k[0], inst.id): (k, inst) for k, inst in moved}, {(k[0], was.id) for k, was in lost}

    def _suspects(self, seen: dict[Key, tuple[tuple[str, int, int], Instance]], want: dict[Key, str],
                  gone: set[Key] | None, ok: set[str]) -> set[Key]:
        """The rows whose state may have moved: listed in another state, or no longer listed."""
        suspects = {key for key, state in want.items() if self._known.get(key, ("", False))[0] != state}
        if gone is None:
            suspects |= {key for key, (_, ended) in self._known.items()
                         if not ended and key[0] in ok and key not in seen}
        else:  # as that, for the instances the listing lost: the rest were listed last time too
            suspects |= {key for key in gone if key[0] in ok and not self._known.get(key, ("", True))[1]}
        return suspects

    def _read(self, suspects: set[Key], full: bool) -> dict[Key, InstanceRow]:
        """The rows of the suspects (a full read: of every instance listed, and every row not ended),
        CHUNK ids per IN list: a list of every instance would pass SQLite's bound-parameter limit."""
        ids = sorted({i for _, i in suspects})
        reads = [select(InstanceRow).where(InstanceRow.terminated_at.is_(None))] if full else []  # type: ignore[union-attr]
        reads += [select(InstanceRow).where(InstanceRow.instance_id.in_(ids[k:k + CHUNK]))  # type: ignore[attr-defined]
                  for k in range(0, len(ids), CHUNK)]
        with self.store.read() as s:
            return {(r.provider, r.instance_id): r for read in reads for r in s.exec(read)}

    def _changes(self, rows: dict[Key, InstanceRow], seen: dict[Key, tuple[tuple[str, int, int], Instance]],
                 want: dict[Key, str], suspects: set[Key], ok: set[str], full: bool, now: datetime,
                 ) -> tuple[list[dict[str, object]], list[dict[str, object]], dict[Key, tuple[str, bool]]]:
        """The rows to insert and to update, and what the table holds once they are written."""
        known = {key: (row.state, row.terminated_at is not None) for key, row in rows.items()}
        added: list[dict[str, object]] = []
        changed: list[dict[str, object]] = []
        for key in suspects & set(seen):
            k, inst = seen[key]
            row, state, ended = rows.get(key), want[key], not inst.state.alive
            if row is None:
                added.append({"provider": k[0], "instance_id": inst.id, "job_id": k[1], "attempt": k[2],
                              "region": inst.region, "zone": inst.zone, "instance_type": inst.instance_type,
                              "spot": inst.spot, "state": state, "first_seen": now, "last_seen": now,
                              "terminated_at": now if ended else None})
                known[key] = (state, ended)
            elif row.state != state:
                changed.append({"id": row.id, "state": state, "last_seen": now,
                                "terminated_at": now if ended else row.terminated_at})
                known[key] = (state, ended or row.terminated_at is not None)
        for key, row in rows.items():
            if (full or key in suspects) and key not in seen and key[0] in ok and row.terminated_at is None:
                changed.append({"id": row.id, "state": "gone", "last_seen": row.last_seen, "terminated_at": now})
                known[key] = ("gone", True)
        return added, changed, known

    def _write(self, added: list[dict[str, object]], changed: list[dict[str, object]]) -> bool:
        """New rows inserted, changed ones updated by primary key, each kind in one statement
        (executemany): no ORM object is built for a new row, none is merged (a SELECT and a flush
        each). False if another daemon recorded the same new instance first (all read again)."""
        try:
            with self.store.write() as s:
                if added:
                    insert_rows(s, INSTANCES, added)  # PostgreSQL: COPY (store/bulk.py)
                if changed:
                    s.execute(update(InstanceRow), changed)
        except IntegrityError:
            log.info("instance table: a row was written concurrently; reading it all again next pass")
            self._known, self._read_at = {}, None
            return False
        return True

    def _unchanged(self, observed: dict[tuple[str, int, int], Instance], ok: set[str]) -> bool:
        """Whether this pass listed the same providers and the same Instance objects (providers
        hand out a new one on any change) as the last update that brought the table up to date."""
        last = self._last
        if last is None or last[1] != ok or len(last[0]) != len(observed):
            return False
        before = last[0]
        return all(map(is_, map(before.get, observed.keys()), observed.values()))  # in C: no frame a key
