"""Daemon heartbeats: is anything running?

Each daemon keeps one ``heartbeat`` row (``models.Heartbeat``) and stamps it after a finished
pass (at most once per ``interval_s``, so an idle daemon adds one small write every few seconds,
not one per wake-up). Readers (``submit``, ``status``, ``logs -f``, ``sweep status``, the doctor,
the dashboard) call ``daemon_state``, a pure function of the rows, the unexpired leases and the
time: a daemon is *alive* when its last pass ended within ``STALE_INTERVALS`` of its interval
(plus ``GRACE_S`` for a slow pass) and it has not stopped.

The rows come from the ORM (``read_state``) or from ``gpuorch.store.lite`` (the quick path of
``gpuorch status``); both have the same attributes.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from gpuorch.clock import utcnow

STALE_INTERVALS = 3  # passes a daemon may miss before it counts as gone
GRACE_S = 30.0  # for one long pass (a big catalog, a slow cloud), on top of the intervals

HOW_TO_START = ("start one with `gpuorch daemon`, or `systemctl start gpuorch` "
                "(`gpuorch install-service` writes the unit)")


class _Beat(Protocol):
    """A heartbeat row, from the ORM (``models.Heartbeat``) or ``store.lite`` (read-only here)."""

    @property
    def owner(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def version(self) -> str: ...
    @property
    def interval_s(self) -> float: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def last_pass_at(self) -> datetime | None: ...
    @property
    def last_outcome(self) -> str | None: ...
    @property
    def stopped_at(self) -> datetime | None: ...


def stale_after_s(interval_s: float) -> float:
    return STALE_INTERVALS * interval_s + GRACE_S


def _alive(b: _Beat, now: datetime) -> bool:
    if b.stopped_at is not None:
        return False
    seen = b.last_pass_at or b.started_at
    return seen is not None and (now - seen).total_seconds() <= stale_after_s(b.interval_s)


def daemon_state(beats: Sequence[_Beat], leases: Mapping[str, int], now: datetime) -> dict[str, Any]:
    """What ``status --json`` shows as ``daemon``: ``alive`` (any daemon alive), ``last_pass_at``
    (the newest pass of any), ``last_outcome``, ``age_s`` and each daemon with the jobs it holds."""
    daemons = [{
        "owner": b.owner, "host": b.host, "pid": b.pid, "version": b.version, "alive": _alive(b, now),
        "started_at": b.started_at, "last_pass_at": b.last_pass_at, "last_outcome": b.last_outcome,
        "stopped_at": b.stopped_at, "jobs_held": leases.get(b.owner, 0),
    } for b in beats]
    newest = max((b for b in beats if b.last_pass_at is not None), key=lambda b: b.last_pass_at,  # type: ignore[arg-type,return-value]
                 default=None)
    last = newest.last_pass_at if newest is not None else None
    return {
        "alive": any(d["alive"] for d in daemons),
        "stopped_at": newest.stopped_at if newest is not None else None,  # the newest daemon's clean stop
        "last_pass_at": last,
        "last_outcome": newest.last_outcome if newest is not None else None,
        "age_s": round((now - last).total_seconds(), 1) if last is not None else None,
        "daemons": daemons,
    }


def warning(state: Mapping[str, Any]) -> str | None:
    """The one line readers print on stderr when no daemon is alive (None when one is)."""
    if state["alive"]:
        return None
    if state["last_pass_at"] is None:
        return f"no gpuorch daemon has run on this store, so nothing will be launched; {HOW_TO_START}"
    if state.get("stopped_at") is not None:
        return (f"the gpuorch daemon stopped at {state['stopped_at']:%Y-%m-%d %H:%M:%S} UTC and none runs now, so "
                f"nothing is being launched or watched; {HOW_TO_START}")
    return (f"no gpuorch daemon has finished a pass for {_ago(state['age_s'])} (last at "
            f"{state['last_pass_at']:%Y-%m-%d %H:%M:%S} UTC), so nothing is being launched or watched; {HOW_TO_START}")


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def load_state(s: Any, now: datetime) -> dict[str, Any]:
    """``daemon_state`` read in the ORM session ``s``."""
    from sqlmodel import col, func, select

    from gpuorch.store.models import Heartbeat, Job

    beats = list(s.exec(select(Heartbeat).order_by(col(Heartbeat.started_at))))
    leases: dict[str, int] = {str(owner): n for owner, n in s.exec(
        select(col(Job.lease_owner), func.count()).where(
            col(Job.lease_owner).is_not(None), col(Job.lease_expires) > now).group_by(col(Job.lease_owner))).all()}
    return daemon_state(beats, leases, now)


def read_state(store: Any, now: datetime) -> dict[str, Any]:
    """``daemon_state`` from a ``Store``."""
    with store.read() as s:
        return load_state(s, now)


class Beater:
    """The daemon's side: ``started`` once, ``passed`` after each pass, ``stopped`` on a clean stop.
    Writes are best effort: a heartbeat that cannot be written never stops the daemon."""

    def __init__(self, store: Any, owner: str, interval_s: float, version: str) -> None:
        self.store, self.owner, self.interval_s, self.version = store, owner, interval_s, version
        self._last_write: datetime | None = None

    def started(self, now: datetime) -> None:
        from gpuorch.store.models import Heartbeat

        with self.store.write() as s:
            row = s.get(Heartbeat, self.owner) or Heartbeat(owner=self.owner)
            row.host, row.pid, row.version = socket.gethostname(), os.getpid(), self.version
            row.interval_s, row.started_at, row.stopped_at = self.interval_s, now, None
            s.add(row)

    def passed(self, now: datetime, outcome: str) -> bool:
        """Stamp the pass; True when written (at most one write per ``interval_s`` while the
        outcome stays ``ok``; a failed pass is always recorded)."""
        if (outcome == "ok" and self._last_write is not None
                and (now - self._last_write).total_seconds() < self.interval_s):
            return False
        self._update(last_pass_at=now, last_outcome=outcome)
        self._last_write = now if outcome == "ok" else None
        return True

    def stopped(self, now: datetime) -> None:
        self._update(stopped_at=now)

    def _update(self, **values: Any) -> None:
        from gpuorch.store.models import Heartbeat

        with self.store.write_unwatched() as s:  # no claim reads it: not a change for them (Store.data_version)
            row = s.get(Heartbeat, self.owner)
            if row is None:  # removed by hand: recreate it
                row = Heartbeat(owner=self.owner, host=socket.gethostname(), pid=os.getpid(), version=self.version,
                                interval_s=self.interval_s, started_at=values.get("last_pass_at") or utcnow())
            for k, v in values.items():
                setattr(row, k, v)
            s.add(row)
