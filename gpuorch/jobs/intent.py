"""Intent the CLI writes: submit and cancel. No cloud call happens here; the daemon acts."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from gpuorch.errors import UnknownJob
from gpuorch.jobs import events
from gpuorch.jobs.spec import JobSpec
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Job, JobStatus
from gpuorch.store.refs import row_id


def submit(store: Store, spec: JobSpec, now: datetime) -> Job:
    with store.write() as s:
        job = Job(name=spec.name, spec=spec.model_dump_json(), status=JobStatus.QUEUED, created_at=now, updated_at=now)
        s.add(job)
        s.flush()
        events.record(s, now, "submitted", f"job {job.name} queued", job_id=job.id)
    return job


def find_job(s: Session, ref: str) -> Job:
    """A job by id, or the newest job with that name. Raises UnknownJob."""
    n = row_id(ref)
    job = s.get(Job, n) if n is not None else s.exec(
        select(Job).where(Job.name == ref).order_by(col(Job.id).desc())).first()
    if job is None:
        raise UnknownJob.ref(ref)
    return job


def cancel(store: Store, ref: str, now: datetime) -> Job:
    with store.write() as s:
        job = find_job(s, ref)
        if not job.status.terminal and not job.cancel_requested:
            job.cancel_requested = True
            events.record(s, now, "cancel_requested", "cancel requested by user", job_id=job.id)
        return job


def attempts_of(s: Session, job_id: int) -> list[Attempt]:
    return list(s.exec(select(Attempt).where(Attempt.job_id == job_id).order_by(col(Attempt.number))))
