"""The per-job event log: what happened, when, in words a person reads."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from sqlmodel import Session

from gpuorch.store.models import Event

log = logging.getLogger("gpuorch.events")


def record(s: Session, now: datetime, kind: str, message: str, *, job_id: int | None = None,
           attempt: int | None = None, **data: Any) -> None:
    s.add(Event(ts=now, job_id=job_id, attempt=attempt, kind=kind, message=message,
                data=json.dumps(data, default=str) if data else None))
    where = f"job {job_id}" + (f" attempt {attempt}" if attempt is not None else "") if job_id else "daemon"
    log.info("%s: %s: %s", where, kind, message, extra={"job_id": job_id, "attempt": attempt, "kind": kind})
