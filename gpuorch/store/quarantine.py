"""Quarantine: a stored row this gpuorch cannot load is marked failed once, with the reason.

A job whose spec no longer validates (written by another version, edited by hand, or stored
before submit checked as strictly as it does now) would otherwise fail on every pass, forever,
with a traceback each time and no word to the user. The daemon calls ``quarantine_job`` the
first time it fails to load the row; ``gpuorch status`` and ``gpuorch events`` show the reason and
``gpuorch doctor`` lists every quarantined row (``KIND`` events).
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlmodel import Session

from gpuorch.store.models import Event, Job, JobStatus

KIND = "quarantined"  # the event kind; doctor lists the jobs that have one


def one_line(reason: str, limit: int = 300) -> str:
    """``reason`` on one line, shortened: it goes into a status message."""
    flat = " ".join(str(reason).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quarantine_job(s: Session, job: Job, reason: str, now: datetime) -> None:
    """Mark ``job`` failed because its row cannot be loaded (once: a terminal job is left alone)."""
    if job.status.terminal:
        return
    why = one_line(reason)
    job.status, job.finished_at, job.updated_at = JobStatus.FAILED, now, now
    job.message = f"its stored spec cannot be read by this gpuorch ({why}); resubmit it"
    s.add(Event(ts=now, job_id=job.id, kind=KIND, message=job.message, data=json.dumps({"reason": why})))
