"""The per-job event log: what happened, when, in words a person reads."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table
from sqlmodel import Session

from gpuorch.notify.kinds import new_uid, notify_type
from gpuorch.store.bulk import insert_rows
from gpuorch.store.models import Event, Notification

log = logging.getLogger("gpuorch.events")
EVENTS = cast(Table, Event.__table__)  # type: ignore[attr-defined]


def record(s: Session, now: datetime, kind: str, message: str, *, job_id: int | None = None,
           attempt: int | None = None, **data: Any) -> None:
    text = json.dumps(data, default=str) if data else None
    s.add(Event(ts=now, job_id=job_id, attempt=attempt, kind=kind, message=message, data=text))
    _notify(s, now, kind, message, job_id, attempt, data, text)
    _log(kind, message, job_id, attempt)


def record_many(s: Session, now: datetime, rows: Sequence[tuple[str, str, int, int | None]]) -> None:
    """``record`` for many events, each (kind, message, job id, attempt) with no data: one Core
    ``INSERT`` (executemany; PostgreSQL: ``COPY``, ``store/bulk.py``) in ``s``'s transaction, no
    ORM object a row (a queue drain writes two events a job; building and flushing their objects
    was most of their cost)."""
    if not rows:
        return
    insert_rows(s, EVENTS, [{"ts": now, "job_id": job_id, "attempt": attempt, "kind": kind, "message": message,
                            "data": None} for kind, message, job_id, attempt in rows])
    for kind, message, job_id, attempt in rows:
        _notify(s, now, kind, message, job_id, attempt, {}, None)
        _log(kind, message, job_id, attempt)


def _notify(s: Session, now: datetime, kind: str, message: str, job_id: int | None, attempt: int | None,
            data: dict[str, Any], text: str | None) -> None:
    """The outbox row of an event worth telling, in the event's own transaction (at least once)."""
    kind_out = notify_type(kind, job_id, attempt, data)
    if kind_out is not None:
        s.add(Notification(uid=new_uid(), ts=now, type=kind_out, job_id=job_id, attempt=attempt, message=message,
                           data=text))


def _log(kind: str, message: str, job_id: int | None, attempt: int | None) -> None:
    where = f"job {job_id}" + (f" attempt {attempt}" if attempt is not None else "") if job_id else "daemon"
    log.info("%s: %s: %s", where, kind, message, extra={"job_id": job_id, "attempt": attempt, "kind": kind})
