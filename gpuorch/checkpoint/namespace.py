"""Whose checkpoints these are: the job's prefix and the verification of a manifest's owner.

Each job's checkpoints live under ``<store>/<installation>/<name>-<id>/``, and every manifest
names its installation, job and attempt. Two installations (two state directories, or two
hosts) may share one store: job 1 of one must never resume job 1 of the other. Restore refuses
any manifest whose owner is not this job (``refusal``), and says why; the job then starts from
the checkpoints that are its own, or fresh.

Jobs stored before namespacing wrote to ``<store>/<name>-<id>/``, a prefix that another
installation's job of the same name and id may have written too. Their manifests name no owner,
so one is restored only if the daemon recorded that very checkpoint for this job
(``legacy_refusal``: name, attempt, and its step and completion time where recorded).

Stdlib only (Python 3.8+): shipped to instances with the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from gpuorch.checkpoint.manifest import Manifest

#: A completion time recorded by the daemon matches the manifest's within this (the DB keeps
#: microseconds; the float round trip loses less than that).
COMPLETED_AT_TOLERANCE_S = 1e-3


@dataclass(frozen=True)
class Owner:
    """This attempt's identity: what its manifests say and what a restore requires."""

    installation: Optional[str]  # None: an agent run by hand (no daemon); see ``refusal``
    job_id: int
    attempt: int
    job_name: Optional[str] = None

    def describe(self) -> str:
        return f"installation {self.installation or '(none)'}, job {self.job_id}"


@dataclass(frozen=True)
class RecordedCheckpoint:
    """A checkpoint the daemon recorded as durable for a job (its ``checkpoint`` table row)."""

    name: str
    attempt: int
    step: Optional[int] = None
    completed_at: Optional[float] = None  # epoch; None where the daemon did not record it

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RecordedCheckpoint:
        step, at = d.get("step"), d.get("completed_at")
        return cls(str(d["name"]), int(d["attempt"]), None if step is None else int(step),
                   None if at is None else float(at))


def job_prefix(installation: str, job_name: str, job_id: int) -> str:
    """The job's key prefix below the store URL: ``<installation>/<name>-<id>``."""
    if not installation or "/" in installation or installation in (".", ".."):
        raise ValueError(f"installation id {installation!r} cannot name a store prefix")
    return f"{installation}/{job_name}-{job_id}"


def legacy_job_prefix(job_name: str, job_id: int) -> str:
    """The prefix of a job stored before namespacing: ``<name>-<id>``."""
    return f"{job_name}-{job_id}"


def _owner_of(m: Manifest) -> str:
    return f"installation {m.installation or '(none)'}, job {m.job_id if m.job_id is not None else '(none)'}"


def refusal(m: Manifest, owner: Owner) -> Optional[str]:
    """Why ``m`` is not ``owner``'s to restore (one line), or None if it is.

    Its installation and job must be the owner's, and it must come from this attempt or an
    earlier one. A manifest naming no owner (format 1) is refused, except by an agent that
    itself has no installation (run by hand, as before namespacing).
    """
    if m.installation is None and m.job_id is None:
        if owner.installation is None:
            return None
        return (f"checkpoint {m.name} (attempt {m.attempt}) names no installation or job (written before checkpoints "
                f"were namespaced); this job ({owner.describe()}) does not resume it")
    if m.installation != owner.installation or m.job_id != owner.job_id:
        return (f"checkpoint {m.name} (attempt {m.attempt}) belongs to {_owner_of(m)}, not to this job "
                f"({owner.describe()}); refused")
    if m.attempt > owner.attempt:
        return (f"checkpoint {m.name} claims attempt {m.attempt} of job {owner.job_id}, but this is attempt "
                f"{owner.attempt}; refused")
    return None


def legacy_refusal(m: Manifest, owner: Owner, recorded: Iterable[RecordedCheckpoint]) -> Optional[str]:
    """Why ``m``, found under the job's old un-namespaced prefix, is not this job's, or None.

    A manifest that names an owner is held to ``refusal``. One that names none is this job's
    only if the daemon recorded a checkpoint of that name from that attempt for this job, with
    the same step and completion time where it recorded them.
    """
    if m.installation is not None or m.job_id is not None:
        return refusal(m, owner)
    for r in recorded:
        if r.name != m.name or r.attempt != m.attempt:
            continue
        if r.step is not None and r.step != m.step:
            continue
        if r.completed_at is not None and (m.completed_at is None
                                           or abs(r.completed_at - m.completed_at) > COMPLETED_AT_TOLERANCE_S):
            continue
        return None
    return (f"checkpoint {m.name} (attempt {m.attempt}, step {m.step}) under the job's old prefix is not one this "
            f"daemon recorded for job {owner.job_id}; another installation may have written it; refused")


def record_refusal(installation: Optional[str], job_id: Optional[int], owner: Owner, what: str) -> Optional[str]:
    """Why a handoff or completion record (``what``) naming ``installation``/``job_id`` is not
    ``owner``'s, or None. Records without an owner pass only for an agent without one."""
    if installation is None and job_id is None:
        if owner.installation is None:
            return None
        return f"{what} names no installation or job; this job ({owner.describe()}) ignores it"
    if installation != owner.installation or job_id != owner.job_id:
        return (f"{what} belongs to installation {installation or '(none)'}, job {job_id}, not to this job "
                f"({owner.describe()}); ignored")
    return None
