"""The preemption handoff record: ``attempts/<n>.final.json``.

An agent writes it once it has done all it will for a notice (final checkpoint uploaded, or
nothing new to upload). The next attempt waits for it before restoring, so it resumes from the
final checkpoint instead of racing the upload.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Optional

from gpuorch.checkpoint.manifest import ATTEMPTS, final_key, join_key
from gpuorch.checkpoint.namespace import Owner
from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore


@dataclass(frozen=True)
class FinalRecord:
    attempt: int
    checkpoint: str | None  # newest checkpoint the attempt made durable; None if none
    at: float  # epoch when it was written
    installation: Optional[str] = None  # whose record it is (None: written without an owner)
    job_id: Optional[int] = None


def write_final(store: ObjectStore, prefix: str, attempt: int, checkpoint: str | None,
                owner: Owner | None = None) -> FinalRecord:
    record = FinalRecord(attempt, checkpoint, time.time(), *_identity(owner))
    store.put_bytes(final_key(prefix, attempt), json.dumps(asdict(record)).encode())
    return record


def _identity(owner: Owner | None) -> tuple[Optional[str], Optional[int]]:
    return (owner.installation, owner.job_id) if owner is not None else (None, None)


def _opt_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def read_final(store: ObjectStore, prefix: str, attempt: int) -> FinalRecord | None:
    try:
        data = json.loads(store.get_bytes(final_key(prefix, attempt)))
    except ObjectNotFound:
        return None
    return FinalRecord(int(data["attempt"]), data.get("checkpoint"), float(data["at"]), data.get("installation"),
                       _opt_int(data.get("job_id")))


def wait_for_final(
    store: ObjectStore, prefix: str, attempt: int, deadline: float, poll: float = 1.0
) -> FinalRecord | None:
    """Poll until attempt ``attempt``'s record exists or the epoch ``deadline`` passes.

    Returns the record, or None at the deadline. Always checks at least once.
    """
    while True:
        record = read_final(store, prefix, attempt)
        if record is not None:
            return record
        remaining = deadline - time.time()
        if remaining <= 0:
            return None
        time.sleep(min(poll, remaining))


# -- the completion record: ``attempts/completed.json`` ---------------------------------------
# Written by the agent once the job has exited 0 and its last checkpoint is synced, before the
# agent reports. An attempt that finds it (its predecessor finished, then its instance vanished
# before the daemon heard) reports that result instead of running the job a second time: a job
# completes at most once, unless its instance dies between the job's exit and this write.


@dataclass(frozen=True)
class CompletedRecord:
    attempt: int
    result: dict[str, Any] | None  # the job's result file, as the agent read it
    at: float
    installation: Optional[str] = None  # whose completion it is (None: written without an owner)
    job_id: Optional[int] = None


def completed_key(prefix: str) -> str:
    return join_key(prefix, f"{ATTEMPTS}completed.json")


def write_completed(store: ObjectStore, prefix: str, attempt: int, result: dict[str, Any] | None,
                    owner: Owner | None = None) -> None:
    record = CompletedRecord(attempt, result, time.time(), *_identity(owner))
    store.put_bytes(completed_key(prefix), json.dumps(asdict(record)).encode())


def read_completed(store: ObjectStore, prefix: str) -> CompletedRecord | None:
    try:
        data = json.loads(store.get_bytes(completed_key(prefix)))
        return CompletedRecord(int(data["attempt"]), data.get("result"), float(data["at"]),
                               data.get("installation"), _opt_int(data.get("job_id")))
    except ObjectNotFound:
        return None
    except (ValueError, KeyError, TypeError):  # unreadable: not a completion the agent can trust
        return None
