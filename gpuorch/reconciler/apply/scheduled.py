"""Warnings of stops the cloud has scheduled ahead (``Instance.scheduled_stop``).

A host retirement or scheduled stop is often announced days ahead. The provider reports it as
the instance's ``preemption_deadline`` (which drains the job: final checkpoint, replacement)
only within its drain horizon; before that the daemon records one ``scheduled_stop`` event per
(instance, announced time), so ``gpuorch events`` shows it as soon as it is known. Once per
instance and time: a rescheduled stop is told again. Restarted daemons look in the event log
before telling again. Only jobs this daemon holds are looked at (HA: one daemon tells).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime

from sqlmodel import select

from gpuorch.jobs import events
from gpuorch.provider.port import Instance
from gpuorch.store import Store
from gpuorch.store.models import Event

KIND = "scheduled_stop"


class ScheduledStops:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._told: set[tuple[str, str]] = set()  # (instance id, announced time)

    def note(self, observed: Mapping[tuple[str, int, int], Instance], jobs: Collection[int], now: datetime) -> None:
        """Record a ``scheduled_stop`` event for each newly announced stop of a live instance of
        one of ``jobs`` (by job id)."""
        for (provider, job_id, attempt), inst in observed.items():
            stop = inst.scheduled_stop
            if stop is None or not inst.state.alive or job_id not in jobs:
                continue
            key = (inst.id, stop.at.isoformat())
            if key in self._told:
                continue
            self._told.add(key)
            with self.store.write() as s:
                earlier = s.exec(select(Event.data).where(Event.job_id == job_id, Event.attempt == attempt,
                                                         Event.kind == KIND))
                if any(json.loads(d or "{}").get("key") == list(key) for d in earlier):
                    continue
                when = (f"gpuorch moves the job off it from {stop.notice_at:%Y-%m-%d %H:%M} UTC"
                        if stop.notice_at is not None and stop.notice_at > now else "gpuorch moves the job off it now")
                why = f" ({stop.description})" if stop.description else ""
                events.record(s, now, KIND, f"{provider} scheduled {stop.kind} of {inst.id} not before "
                              f"{stop.at:%Y-%m-%d %H:%M} UTC{why}; {when}", job_id=job_id, attempt=attempt,
                              key=list(key), instance_id=inst.id, code=stop.kind, at=stop.at,
                              notice_at=stop.notice_at)
