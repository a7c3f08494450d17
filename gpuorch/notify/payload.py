"""The body of a notification (schema ``gpuorch.notification/v1``, docs/notifications.md), built
once from the outbox row and the store when the sender first routes it; every try and every
route then sends the same bytes. Standard Webhooks' shape: ``type``, ``timestamp``, ``data``;
plus ``id`` (the ``webhook-id``), ``schema`` and ``chat`` (the title and text a chat shows)."""

from __future__ import annotations

import json
from collections import deque
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.jobs.logmirror import LogMirror
from gpuorch.money.cost import attempt_cost
from gpuorch.notify.kinds import SCHEMA
from gpuorch.notify.report import morning_report
from gpuorch.store.models import Attempt, Job, Notification, Sweep, SweepStatus

MAX_LINE = 500  # a log line's characters in a message (a progress bar can be one line of megabytes)
_TITLES = {
    "job.succeeded": "succeeded", "job.failed": "FAILED", "job.cancelled": "cancelled",
    "job.budget_exhausted": "stopped by a cap", "job.preempted": "preempted", "cap.reached": "cap reached",
    "cap.warning": "cap 80 % spent",
}


# Titles of the events no job is the subject of; ``{key}``: the event's data
_DAEMON_TITLES = {"cap.warning": "gpuorch: the daily cap is 80 % spent",
                  "provider.credentials_failed": "gpuorch: {provider} refused the daemon's credentials",
                  "orphan.terminated": "gpuorch: an orphan instance was terminated",
                  "daemon.restarted": "gpuorch: the daemon restarted after a crash"}


def _daemon_title(type_: str, event: Any) -> str:
    try:
        return _DAEMON_TITLES[type_].format(**event)
    except (KeyError, IndexError, ValueError, TypeError):  # another type, or an event without the key
        return f"gpuorch: {type_}"


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat().replace("+00:00", "Z") if ts is not None else None


def log_tail(logs: LogMirror | None, job_id: int, attempt: int | None, lines: int) -> list[str]:
    """The last ``lines`` lines of the attempt's mirrored log (each cut to MAX_LINE characters)."""
    if logs is None or attempt is None or lines <= 0:
        return []
    try:
        with open(logs.path(job_id, attempt), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - lines * (MAX_LINE + 1) * 4))  # enough bytes for the lines asked
            tail = deque(f.read().decode("utf-8", "replace").splitlines(), maxlen=lines)
    except OSError:
        return []
    return [line[:MAX_LINE] for line in tail]


def _job(s: Session, job: Job, row: Notification, logs: LogMirror | None, log_lines: int,
         now: datetime) -> dict[str, Any]:
    attempts = list(s.exec(select(Attempt).where(Attempt.job_id == job.id).order_by(col(Attempt.number))))
    number = row.attempt or (attempts[-1].number if attempts else None)
    at = next((a for a in attempts if a.number == number), None)
    sweep = s.get(Sweep, job.sweep_id) if job.sweep_id is not None else None
    out: dict[str, Any] = {
        "id": job.id, "name": job.name, "status": job.status.value, "message": job.message,
        "exit_code": job.exit_code, "sweep": {"id": sweep.id, "name": sweep.name} if sweep else None,
        "params": json.loads(job.params) if job.params else None,
        "attempts": len(attempts), "preemptions": job.preemptions, "failures": job.failures,
        "cost_usd": round(sum(attempt_cost(a, now) for a in attempts), 6),
        "created_at": _iso(job.created_at), "finished_at": _iso(job.finished_at),
    }
    if at is not None:
        out["attempt"] = {"number": at.number, "provider": at.provider, "region": at.region, "zone": at.zone,
                          "instance_type": at.instance_type, "spot": at.spot, "reason": at.reason.value
                          if at.reason else None, "exit_code": at.exit_code, "lost_work_s": at.lost_work_s}
    if row.type in ("job.failed", "job.succeeded", "job.budget_exhausted", "job.cancelled"):
        out["log_tail"] = log_tail(logs, job.id or 0, number, log_lines)
    return out


def sweep_id_of(row: Notification) -> int | None:
    """The sweep a notification is about, where its event names one (``sweep.finished``,
    ``cap.warning`` of a sweep's cap)."""
    try:
        sid = json.loads(row.data).get("sweep_id") if row.data else None
    except (ValueError, AttributeError):
        return None
    return sid if isinstance(sid, int) and not isinstance(sid, bool) else None


def _sweep_of(s: Session, row: Notification) -> Sweep | None:
    """The sweep a ``sweep_done`` event is about: its ``sweep_id``; for an event stored before it
    carried one, the sweep done in the event's transaction (same time) named in its message."""
    sid = sweep_id_of(row)
    if sid is not None:
        return s.get(Sweep, sid)
    name = row.message.removeprefix("sweep ").rsplit(" done: ", 1)[0]
    q = select(Sweep).where(Sweep.name == name, Sweep.status == SweepStatus.DONE).order_by(col(Sweep.id).desc())
    found = list(s.exec(q))
    return next((w for w in found if w.finished_at == row.ts), found[0] if found else None)


def _chat_job(type_: str, job: dict[str, Any], message: str) -> dict[str, str]:
    title = f"gpuorch: job {job['name']} ({job['id']}) {_TITLES.get(type_, type_)}"
    lines = [message, f"status {job['status']}, {job['attempts']} attempt(s), {job['preemptions']} preemption(s), "
             f"${job['cost_usd']:.2f}"]
    at = job.get("attempt")
    if at:
        lines.append(f"on {at['provider']} {at['instance_type']} in {at['zone'] or at['region']}"
                     + (" (spot)" if at["spot"] else "")
                     + (f", lost work {at['lost_work_s']:.0f}s" if at.get("lost_work_s") else ""))
    if job.get("exit_code") is not None:
        lines.append(f"exit code {job['exit_code']}")
    if job.get("log_tail"):
        lines += ["last log lines:", *("    " + line for line in job["log_tail"])]
    return {"title": title, "text": "\n".join(lines)}


def build(s: Session, row: Notification, *, installation: str, logs: LogMirror | None, log_lines: int,
          now: datetime) -> dict[str, Any]:
    """The document sent for ``row`` (JSON-ready)."""
    data: dict[str, Any] = {"message": row.message, "event": json.loads(row.data) if row.data else {}}
    chat = {"title": _daemon_title(row.type, data["event"]), "text": row.message}
    job = s.get(Job, row.job_id) if row.job_id is not None else None
    if job is not None:
        data["job"] = _job(s, job, row, logs, log_lines, now)
        chat = _chat_job(row.type, data["job"], row.message)
    sid = sweep_id_of(row)
    if job is None and sid is not None and (named := s.get(Sweep, sid)) is not None:
        data["sweep"] = {"id": named.id, "name": named.name}  # a sweep's own event (cap.warning): which sweep
        chat = {"title": f"gpuorch: sweep {named.name} ({named.id}) {_TITLES.get(row.type, row.type)}",
                "text": row.message}
    if row.type == "sweep.finished":
        sweep = _sweep_of(s, row)
        if sweep is not None:
            report = morning_report(s, [sweep], now)
            data["sweep"] = report["sweeps"][0]
            chat = {"title": report["title"], "text": report["text"]}
            data["report"] = {"text": report["text"], "markdown": report["markdown"]}
    if row.type == "report.morning":
        report = json.loads(row.data or "{}")
        chat = {"title": report.get("title", "gpuorch: morning report"), "text": report.get("text", row.message)}
        data = {"message": row.message, "report": report}
    return {"id": row.uid, "type": row.type, "timestamp": _iso(row.ts), "schema": SCHEMA,
            "installation": installation, "data": data, "chat": chat}
