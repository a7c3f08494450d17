"""The public notification types and which stored events they come from: a leaf the event log
(``jobs.events``, which fills the outbox) and the config (``ops.config``, which checks a route's
``events:``) both read, light enough for every CLI command."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA = "gpuorch.notification/v1"  # the body's schema (docs/notifications.md); a change is a new version

# The public notification types (docs/notifications.md) and what each is made of. A route's
# ``events:`` names these; the sender (gpuorch.notify) turns the outbox rows into messages.
NOTIFY_TYPES = {
    "job.succeeded": "a job ended with exit code 0",
    "job.failed": "a job failed for good (exit code, last log lines)",
    "job.cancelled": "a job was cancelled",
    "job.budget_exhausted": "a job was stopped, or never started, so as not to cross a cap",
    "job.preempted": "an attempt was preempted or lost; the job goes on if its retries allow",
    "cap.warning": "a cap (job, sweep or daily) is 80 % spent; told once per cap and amount",
    "cap.reached": "a cap is stopping a running job cleanly (job, sweep or daily cap)",
    "sweep.finished": "every trial of a sweep has ended (with the morning report)",
    "orphan.terminated": "an instance no attempt owned was found and terminated",
    "provider.credentials_failed": "a provider refused the daemon's credentials (at a launch, a listing or a runner)",
    "daemon.restarted": "a daemon started after an earlier one on this host died without stopping",
    "report.morning": "at notifications.report_at: the sweeps that ended in the day before, in one message",
}
_JOB_ENDS = {"succeeded", "failed", "cancelled", "budget_exhausted"}
# The types a job or a sweep can be the subject of: what its spec's ``notify.silence`` may name.
SUBJECT_TYPES = ("job.succeeded", "job.failed", "job.cancelled", "job.budget_exhausted", "job.preempted",
                 "cap.warning", "cap.reached", "sweep.finished")
WARN_SHARE = 0.8  # cap.warning: this share of a cap spent
_ROUTE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # as notifications.*[].name (ops.config); compiled on first use


def notify_type(kind: str, job_id: int | None, attempt: int | None, data: dict[str, Any]) -> str | None:
    """The public type of an event (one of ``NOTIFY_TYPES``), or None for one nobody is told about."""
    if kind in _JOB_ENDS and job_id is not None and attempt is None:  # the job's own status change
        return f"job.{kind}"
    if kind == "attempt_ended" and data.get("reason") in ("preempted", "lost"):
        return "job.preempted"
    if kind == "stop_requested" and data.get("reason") in ("budget_exhausted", "held"):
        return "cap.reached"
    return {"sweep_done": "sweep.finished", "orphan_terminated": "orphan.terminated",
            "credentials_failed": "provider.credentials_failed"}.get(kind)


def new_uid() -> str:
    """A notification's one id, sent as ``webhook-id`` on every try (Standard Webhooks' ``msg_`` style)."""
    import secrets  # here: the CLI imports this module on every command that reads the config

    return "msg_" + secrets.token_hex(16)


class NotifySpec(BaseModel):
    """``notify:`` of a job or a sweep (a sweep's applies to its trials and its ``sweep.finished``):

    - ``routes``: route names (``notifications.*[].name`` in the daemon's config) that also get
      this job's events, whatever their ``jobs:`` and ``sweeps:`` filters say (their ``events:``
      still apply). A name no route of the daemon has is logged by the daemon and sends nothing.
    - ``silence``: event types never sent for this job (or the sweep and its trials), on any
      route; ``[all]`` silences every one.

    Checked by rule when the spec is loaded: one line naming the field and the fix."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built with the first job spec

    routes: list[str] = Field(default_factory=list, max_length=100)
    silence: list[str] = Field(default_factory=list, max_length=len(SUBJECT_TYPES) + 1)

    @field_validator("routes", "silence", mode="before")
    @classmethod
    def _one(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v  # silence: all, routes: team

    @field_validator("routes")
    @classmethod
    def _routes(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(_ROUTE_NAME, name):
                raise ValueError(f"{name[:64]!r} is not a route name; write the name: of a route in the daemon's "
                                 "notifications (1 to 64 letters, digits, '.', '_' or '-')")
        return v

    @field_validator("silence")
    @classmethod
    def _silence(cls, v: list[str]) -> list[str]:
        for kind in v:
            if kind != "all" and kind not in SUBJECT_TYPES:
                raise ValueError(f"{kind[:64]!r} is not an event a job or sweep sends; write all, or some of: "
                                 f"{', '.join(SUBJECT_TYPES)}")
        return v

    def quiet(self, type_: str) -> bool:
        return "all" in self.silence or type_ in self.silence
