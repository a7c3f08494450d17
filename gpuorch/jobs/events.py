"""The per-job event log: what happened, when, in words a person reads."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlmodel import Session

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
    ``INSERT`` (executemany) in ``s``'s transaction, no ORM object a row (a queue drain writes two
    events a job; building and flushing their objects was most of their cost)."""
    if not rows:
        return
    s.execute(insert(EVENTS), [{"ts": now, "job_id": job_id, "attempt": attempt, "kind": kind, "message": message,
                                "data": None} for kind, message, job_id, attempt in rows])
    for kind, message, job_id, attempt in rows:
        _notify(s, now, kind, message, job_id, attempt, {}, None)
        _log(kind, message, job_id, attempt)


# The public notification types (docs/notifications.md) and what each is made of. A route's
# ``events:`` names these; the sender (gpuorch.notify) turns the outbox rows into messages.
NOTIFY_TYPES = {
    "job.succeeded": "a job ended with exit code 0",
    "job.failed": "a job failed for good (exit code, last log lines)",
    "job.cancelled": "a job was cancelled",
    "job.budget_exhausted": "a job was stopped, or never started, so as not to cross a cap",
    "job.preempted": "an attempt was preempted or lost; the job goes on if its retries allow",
    "cap.reached": "a cap is stopping a running job cleanly (job, sweep or daily cap)",
    "sweep.finished": "every trial of a sweep has ended (with the morning report)",
    "orphan.terminated": "an instance no attempt owned was found and terminated",
    "daemon.restarted": "a daemon started after an earlier one on this host died without stopping",
}
_JOB_ENDS = {"succeeded", "failed", "cancelled", "budget_exhausted"}


def notify_type(kind: str, job_id: int | None, attempt: int | None, data: dict[str, Any]) -> str | None:
    """The public type of an event (one of ``NOTIFY_TYPES``), or None for one nobody is told about."""
    if kind in _JOB_ENDS and job_id is not None and attempt is None:  # the job's own status change
        return f"job.{kind}"
    if kind == "attempt_ended" and data.get("reason") in ("preempted", "lost"):
        return "job.preempted"
    if kind == "stop_requested" and data.get("reason") in ("budget_exhausted", "held"):
        return "cap.reached"
    return {"sweep_done": "sweep.finished", "orphan_terminated": "orphan.terminated"}.get(kind)


def new_uid() -> str:
    """A notification's one id, sent as ``webhook-id`` on every try (Standard Webhooks' ``msg_`` style)."""
    return "msg_" + secrets.token_hex(16)


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
