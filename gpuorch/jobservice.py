"""What the CLI and the HTTP API both do with jobs, on the store of this host.

``JobService`` is the one implementation of submit, status, cancel, events and logs; the CLI calls
it directly (no ``--server``) and the API's endpoints are thin wrappers around it, so a command
gives the same answer and the same one-line errors either way. ``gpuorch.api.client.Client`` has
the same methods over HTTP. Every method returns plain JSON-able data (datetimes stay datetimes;
callers encode them with ``str``) and raises ``UserInputError`` for anything a user can fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import select

from . import jobs
from .clock import utcnow
from .cost import attempt_cost
from .logmirror import LogMirror
from .spec import JobSpec
from .store import Store
from .store.models import Attempt, Event, Job

LOG_CHUNK = 1 << 20  # bytes of job output per read_log call


def job_summary(job: Job, attempts: list[Attempt], now: datetime) -> dict[str, Any]:
    cur = attempts[-1] if attempts else None
    return {
        "id": job.id,
        "name": job.name,
        "status": job.status.value,
        "message": job.message,
        "attempts": len(attempts),
        "preemptions": job.preemptions,
        "failures": job.failures,
        "where": f"{cur.provider}/{cur.zone}/{cur.instance_type}/{'spot' if cur.spot else 'on-demand'}" if cur else None,
        "last_checkpoint": next((a.last_checkpoint for a in reversed(attempts) if a.last_checkpoint), None),
        "cost": round(sum(attempt_cost(a, now) for a in attempts), 4),
        "lost_work_s": round(sum(a.lost_work_s or 0.0 for a in attempts), 1),
        "exit_code": job.exit_code,
        "result": json.loads(job.result) if job.result else None,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "daemon": job.lease_owner,  # host/pid/random of the daemon holding it (several daemons: docs/ha.md)
    }


def attempt_dict(a: Attempt, now: datetime) -> dict[str, Any]:
    return {
        "number": a.number, "status": a.status.value, "reason": a.reason.value if a.reason else None,
        "provider": a.provider, "region": a.region, "zone": a.zone, "instance_type": a.instance_type,
        "gpu": a.gpu, "gpu_count": a.gpu_count, "spot": a.spot, "price_per_hour": a.price_per_hour,
        "instance_id": a.instance_id, "resumed_from": a.resumed_from, "last_checkpoint": a.last_checkpoint,
        "lost_work_s": a.lost_work_s, "exit_code": a.exit_code, "message": a.message,
        "requested_at": a.requested_at, "started_at": a.started_at, "notice_at": a.notice_at, "ended_at": a.ended_at,
        "cost": round(attempt_cost(a, now), 4),
    }


class JobService:
    def __init__(self, store: Store, home: Path, now: Callable[[], datetime] = utcnow) -> None:
        self.store, self.mirror, self.now = store, LogMirror(home), now

    def submit(self, spec: JobSpec) -> dict[str, Any]:
        """Queue a validated spec (its workdir, if any, already an absolute path on this host)."""
        job = jobs.submit(self.store, spec, self.now())
        return {"id": job.id, "name": job.name, "status": job.status.value}

    def jobs(self) -> list[dict[str, Any]]:
        now = self.now()
        with self.store.read() as s:
            return [job_summary(j, jobs.attempts_of(s, j.id), now)  # type: ignore[arg-type]
                    for j in s.exec(select(Job).order_by(Job.id))]  # type: ignore[arg-type]

    def job(self, ref: str) -> dict[str, Any]:
        """One job by id or name, with ``attempt_list``. Raises UnknownJob."""
        now = self.now()
        with self.store.read() as s:
            j = jobs.find_job(s, ref)
            atts = jobs.attempts_of(s, j.id)  # type: ignore[arg-type]
            return job_summary(j, atts, now) | {"attempt_list": [attempt_dict(a, now) for a in atts]}

    def cancel(self, ref: str) -> dict[str, Any]:
        j = jobs.cancel(self.store, ref, self.now())
        return {"id": j.id, "name": j.name, "status": j.status.value, "cancel_requested": j.cancel_requested,
                "done": j.status.terminal}

    def events(self, ref: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """The newest ``limit`` events (of one job, with ``ref``), oldest first."""
        with self.store.read() as s:
            q = select(Event)
            if ref is not None:
                q = q.where(Event.job_id == jobs.find_job(s, ref).id)
            rows = list(s.exec(q.order_by(Event.id.desc()).limit(limit)))[::-1]  # type: ignore[union-attr]
        return [{"ts": e.ts, "job_id": e.job_id, "attempt": e.attempt, "kind": e.kind, "message": e.message,
                 "data": json.loads(e.data) if e.data else None} for e in rows]

    def log_state(self, ref: str) -> dict[str, Any]:
        """What ``logs`` needs to poll a job: its id, attempt numbers, and whether it is over."""
        with self.store.read() as s:
            j = jobs.find_job(s, ref)
            numbers = [a.number for a in jobs.attempts_of(s, j.id)]  # type: ignore[arg-type]
        return {"id": j.id, "name": j.name, "attempts": numbers, "done": j.status.terminal}

    def read_log(self, job_id: int, attempt: int, offset: int = 0, limit: int = LOG_CHUNK) -> bytes:
        """Up to ``limit`` bytes of the mirrored output of one attempt from ``offset`` (b"" if none yet)."""
        try:
            with self.mirror.path(job_id, attempt).open("rb") as f:
                f.seek(max(0, offset))
                return f.read(limit)
        except FileNotFoundError:
            return b""
