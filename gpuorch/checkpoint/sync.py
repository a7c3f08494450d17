"""Moving checkpoints between a local checkpoint directory and any ObjectStore.

Writers: one agent at a time per prefix (the handoff record sequences attempts). ``prune`` must
not run while another process uploads to the same prefix: it deletes blobs no manifest
references yet. Readers may run at any time: a manifest is written only after all its blobs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from gpuorch.checkpoint.local import COMPLETE, checkpoint_files, read_checkpoint
from gpuorch.checkpoint.manifest import (
    MANIFESTS,
    CheckpointError,
    CorruptCheckpoint,
    FileEntry,
    Manifest,
    blob_key,
    parse_manifest_key,
)
from gpuorch.checkpoint.namespace import Owner
from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore, join_key


class IncompleteCheckpoint(CheckpointError):
    """The directory has no ``COMPLETE`` marker: the job has not finished writing it."""


class CheckpointVanished(CheckpointError):
    """The job deleted or rewrote the checkpoint while it was being uploaded."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _manifest_keys(store: ObjectStore, prefix: str) -> list[str]:
    """Manifest keys, oldest (lowest seq) first."""
    keys = [k for k in store.list(join_key(prefix, MANIFESTS)) if parse_manifest_key(k)]
    return sorted(keys, key=lambda k: parse_manifest_key(k) or (0, ""))


def _load(store: ObjectStore, key: str) -> Manifest | None:
    try:
        return Manifest.from_json(store.get_bytes(key).decode())
    except (ObjectNotFound, CorruptCheckpoint, UnicodeDecodeError):
        return None  # pruned meanwhile, or not written by us: never visible


def list_manifests(store: ObjectStore, prefix: str) -> list[Manifest]:
    """Every visible checkpoint under ``prefix``, oldest first."""
    found = (_load(store, k) for k in _manifest_keys(store, prefix))
    return [m for m in found if m is not None]


def latest(store: ObjectStore, prefix: str) -> Manifest | None:
    """The newest visible checkpoint (highest seq), or None if there is none."""
    for key in reversed(_manifest_keys(store, prefix)):
        manifest = _load(store, key)
        if manifest is not None:
            return manifest
    return None


def upload(store: ObjectStore, prefix: str, local_dir: Path, attempt: int, owner: Owner | None = None) -> Manifest:
    """Upload the complete checkpoint at ``local_dir``; return its (now visible) manifest.

    ``owner``: the job the manifest names (``namespace``); without one it names none (format 1
    readers, hand-run agents). Sends only blobs the store lacks, then writes the manifest last.
    Idempotent: if the newest manifest of that name already lists the same files and the same
    owner, returns it without writing anything.
    Raises ``IncompleteCheckpoint`` without ``COMPLETE``; ``CheckpointVanished`` if the job
    removes files mid-upload (nothing becomes visible then; orphan blobs go at the next prune).
    """
    local_dir = Path(local_dir)
    ckpt = read_checkpoint(local_dir)
    if ckpt is None:
        raise IncompleteCheckpoint(f"{local_dir} has no {COMPLETE} file yet; not uploading")
    existing: set[str] = {k.rsplit("/", 1)[-1] for k in store.list(blob_key(prefix, ""))}
    files: list[FileEntry] = []
    try:
        for rel, path in checkpoint_files(local_dir):
            digest = sha256_file(path)
            if digest not in existing:
                store.put_file(blob_key(prefix, digest), path)
                existing.add(digest)
            files.append(FileEntry(rel, path.stat().st_size, digest))
    except FileNotFoundError as e:
        raise CheckpointVanished(f"{local_dir} changed while uploading ({e.filename})") from None
    if read_checkpoint(local_dir) is None:
        raise CheckpointVanished(f"{local_dir} was removed while uploading")

    keys = _manifest_keys(store, prefix)
    for key in reversed(keys):
        if (parse_manifest_key(key) or (0, ""))[1] == ckpt.name:
            previous = _load(store, key)
            if previous is not None and previous.files == files and _same_owner(previous, owner):
                return previous
            break
    seq = (parse_manifest_key(keys[-1]) or (0, ""))[0] + 1 if keys else 1
    manifest = Manifest(ckpt.name, ckpt.step, attempt, time.time(), files, ckpt.completed_at, seq,
                        installation=owner.installation if owner else None,
                        job_id=owner.job_id if owner else None, job_name=owner.job_name if owner else None)
    store.put_bytes(manifest.key(prefix), manifest.to_json().encode())
    return manifest


def _same_owner(m: Manifest, owner: Owner | None) -> bool:
    if owner is None:
        return m.installation is None and m.job_id is None
    return (m.installation, m.job_id) == (owner.installation, owner.job_id)


def download(store: ObjectStore, prefix: str, manifest: Manifest, dest_checkpoint_dir: Path) -> Path:
    """Restore ``manifest`` as ``dest_checkpoint_dir/<name>``; return that path.

    Stages in a hidden temp dir, verifies every file's size and sha256, recreates ``COMPLETE``
    (with the job's original mtime) and only then renames into place, replacing any local
    directory of that name. Raises ``CorruptCheckpoint`` on a mismatch or a missing blob;
    nothing is left behind then.
    """
    dest_root = Path(dest_checkpoint_dir)
    dest_root.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=dest_root, prefix=f".restore-{manifest.name}-"))
    try:
        for entry in manifest.files:
            target = stage / _safe_relpath(entry.path, manifest.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            key = blob_key(prefix, entry.sha256)
            try:
                store.get_file(key, target)
            except ObjectNotFound:
                raise CorruptCheckpoint(f"checkpoint {manifest.name}: blob {key} for {entry.path} is missing") from None
            digest = sha256_file(target)
            if digest != entry.sha256 or target.stat().st_size != entry.size:
                raise CorruptCheckpoint(
                    f"checkpoint {manifest.name}: {entry.path} has sha256 {digest[:12]}… but the manifest "
                    f"says {entry.sha256[:12]}…; blob {key} is corrupt"
                )
        marker = stage / COMPLETE
        if not marker.exists():
            marker.write_text(f'{{"step": {"null" if manifest.step is None else manifest.step}}}')
        if manifest.completed_at is not None:
            os.utime(marker, (manifest.completed_at, manifest.completed_at))
        final = dest_root / manifest.name
        if final.exists():
            shutil.rmtree(final)
        os.rename(stage, final)
        return final
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _safe_relpath(path: str, name: str) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or not p.parts or ".." in p.parts:
        raise CorruptCheckpoint(f"checkpoint {name}: unsafe file path {path!r} in manifest")
    return str(p)


def prune(store: ObjectStore, prefix: str, keep: int) -> list[str]:
    """Keep the newest ``keep`` checkpoints; delete older manifests, then unreferenced blobs.

    Manifests go first so no visible checkpoint ever lacks a blob. Returns the deleted keys.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    deleted = []
    for key in _manifest_keys(store, prefix)[:-keep]:
        store.delete(key)
        deleted.append(key)
    needed = {f.sha256 for m in list_manifests(store, prefix) for f in m.files}
    for key in store.list(blob_key(prefix, "")):
        if key.rsplit("/", 1)[-1] not in needed:
            store.delete(key)
            deleted.append(key)
    return deleted
