"""The preemption handoff record: ``attempts/<n>.final.json``.

An agent writes it once it has done all it will for a notice (final checkpoint uploaded, or
nothing new to upload). The next attempt waits for it before restoring, so it resumes from the
final checkpoint instead of racing the upload.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from gpuorch.checkpoint.manifest import final_key
from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore


@dataclass(frozen=True)
class FinalRecord:
    attempt: int
    checkpoint: str | None  # newest checkpoint the attempt made durable; None if none
    at: float  # epoch when it was written


def write_final(store: ObjectStore, prefix: str, attempt: int, checkpoint: str | None) -> FinalRecord:
    record = FinalRecord(attempt, checkpoint, time.time())
    store.put_bytes(final_key(prefix, attempt), json.dumps(asdict(record)).encode())
    return record


def read_final(store: ObjectStore, prefix: str, attempt: int) -> FinalRecord | None:
    try:
        data = json.loads(store.get_bytes(final_key(prefix, attempt)))
    except ObjectNotFound:
        return None
    return FinalRecord(int(data["attempt"]), data.get("checkpoint"), float(data["at"]))


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
