"""The store side of the checkpoint protocol: key layout and the manifest format.

A job's prefix is ``<store>/<installation>/<name>-<id>/`` (``gpuorch.checkpoint.namespace``).
Under it::

    blobs/<sha256>                         file contents, content-addressed (shared by checkpoints)
    manifests/<seq:012d>-<name>.json       one per checkpoint, written after all its blobs
    attempts/<n>.final.json                handoff record of attempt n after a notice

A checkpoint is visible only once its manifest exists; ``seq`` orders manifests (newest last).
A manifest names its owner (installation, job id and name, attempt); restore checks that
(``namespace.refusal``). Format 1 manifests (before namespacing) name no installation or job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gpuorch.checkpoint.store import join_key

FORMAT = 2  # 2: the manifest names its installation and job
BLOBS = "blobs/"
MANIFESTS = "manifests/"
ATTEMPTS = "attempts/"


class CheckpointError(Exception):
    """Base of the checkpoint protocol's errors."""


class CorruptCheckpoint(CheckpointError):
    """A manifest or blob in the store does not match what was recorded."""


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative posix path inside the checkpoint directory
    size: int
    sha256: str


@dataclass
class Manifest:
    name: str  # the checkpoint directory's name
    step: int | None
    attempt: int  # the attempt that uploaded it
    created_at: float  # when the manifest was written (epoch)
    files: list[FileEntry] = field(default_factory=list)
    completed_at: float | None = None  # when the job finished writing it (COMPLETE's mtime)
    seq: int = 0  # position in the store's sequence; also encoded in the key
    # Whose checkpoint it is (format 2); None in a format 1 manifest, or one uploaded by an agent
    # run without an installation.
    installation: str | None = None
    job_id: int | None = None
    job_name: str | None = None

    def key(self, prefix: str) -> str:
        return manifest_key(prefix, self.seq, self.name)

    def to_json(self) -> str:
        return json.dumps(dict(asdict(self), format=FORMAT), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        try:
            d = json.loads(text)
            files = [FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in d["files"]]
            return cls(
                name=str(d["name"]),
                step=d.get("step"),
                attempt=int(d["attempt"]),
                created_at=float(d["created_at"]),
                files=files,
                completed_at=d.get("completed_at"),
                seq=int(d.get("seq", 0)),
                installation=_opt_str(d.get("installation")),
                job_id=None if d.get("job_id") is None else int(d["job_id"]),
                job_name=_opt_str(d.get("job_name")),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptCheckpoint(f"unreadable manifest: {e!r}") from None


def _opt_str(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def blob_key(prefix: str, sha256: str) -> str:
    return join_key(prefix, BLOBS + sha256)


def manifest_key(prefix: str, seq: int, name: str) -> str:
    return join_key(prefix, f"{MANIFESTS}{seq:012d}-{name}.json")


def final_key(prefix: str, attempt: int) -> str:
    return join_key(prefix, f"{ATTEMPTS}{attempt}.final.json")


def parse_manifest_key(key: str) -> tuple[int, str] | None:
    """``(seq, name)`` from a manifest key, or None if ``key`` is not one."""
    base = key.rsplit("/", 1)[-1]
    if not base.endswith(".json") or len(base) < 14 or base[12] != "-" or not base[:12].isdigit():
        return None
    return int(base[:12]), base[13:-5]
