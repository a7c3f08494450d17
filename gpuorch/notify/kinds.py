"""The public notification types and which stored events they come from: a leaf the event log
(``jobs.events``, which fills the outbox) and the config (``ops.config``, which checks a route's
``events:``) both read, light enough for every CLI command."""

from __future__ import annotations

import secrets
from typing import Any

SCHEMA = "gpuorch.notification/v1"  # the body's schema (docs/notifications.md); a change is a new version

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
    "report.morning": "at notifications.report_at: the sweeps that ended in the day before, in one message",
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
