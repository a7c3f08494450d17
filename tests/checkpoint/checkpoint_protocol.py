"""The checkpoint protocol (gpuorch.checkpoint.sync) over a cloud ObjectStore: incremental upload,
big blobs in parts, restore, pruning, and manifest-last visibility.

``CheckpointProtocolContract`` is shared by the cloud stores' test modules (tests/s3, tests/gcs, tests/azblob):
a subclass provides these fixtures —

- ``store``: an empty store (a fresh bucket);
- ``chunked_store``: a second store on the same bucket whose big files move in 5 MB parts/chunks;
- ``writes``: what ``store`` writes over the wire, ``Writes``-shaped (object keys, in order);
- ``store_url``: the URL of the bucket's root (``s3://bucket``, ``gs://bucket``, ``az://container@account``).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
from pathlib import Path
from typing import Protocol

import pytest

from gpuorch.checkpoint import (
    COMPLETE,
    ObjectStore,
    download,
    latest,
    list_manifests,
    open_store,
    prune,
    upload,
)

MB = 1 << 20
PREFIX = "jobs/ft-1"


class Writes(Protocol):
    def keys(self) -> list[str]:
        """Keys of the objects written (one entry per object put), in order."""

    def clear(self) -> None: ...


def make_checkpoint(root: Path, name: str, step: int, **files: bytes) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for rel, data in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    (d / COMPLETE).write_text(json.dumps({"step": step}))
    return d


class CrashBeforeManifest(ObjectStore):
    """Wraps a store and dies after the blobs, before the manifest: the process killed mid-upload."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    @classmethod
    def from_url(cls, url: str) -> tuple[ObjectStore, str]:
        raise NotImplementedError

    def put_bytes(self, key: str, data: bytes) -> None:
        if "/manifests/" in key:
            raise OSError("simulated crash before the manifest")
        self.inner.put_bytes(key, data)

    def put_file(self, key: str, path: Path) -> None:
        self.inner.put_file(key, path)

    def get_file(self, key: str, path: Path) -> None:
        self.inner.get_file(key, path)

    def get_bytes(self, key: str) -> bytes:
        return self.inner.get_bytes(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def list(self, prefix: str = "") -> builtins.list[str]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


class CheckpointProtocolContract:
    def test_unchanged_files_are_not_sent_again(self, store: ObjectStore, writes: Writes, tmp_path: Path):
        base = os.urandom(MB)  # frozen weights, the same in every checkpoint
        base_key = f"{PREFIX}/blobs/{hashlib.sha256(base).hexdigest()}"
        upload(store, PREFIX, make_checkpoint(tmp_path, "step-1", 1, base=base, adapter=b"a1"), attempt=1)
        blobs = [k for k in writes.keys() if "/blobs/" in k]
        assert len(blobs) == 3 and base_key in blobs  # base, adapter, COMPLETE

        writes.clear()
        m2 = upload(store, PREFIX, make_checkpoint(tmp_path, "step-2", 2, base=base, adapter=b"a2"), attempt=1)
        blobs = [k for k in writes.keys() if "/blobs/" in k]
        assert len(blobs) == 2 and base_key not in blobs  # adapter, COMPLETE
        assert writes.keys()[-1] == m2.key(PREFIX)  # the manifest goes last

        writes.clear()
        again = upload(store, PREFIX, tmp_path / "step-2", attempt=1)  # idempotent: nothing written
        assert again == m2 and writes.keys() == []

    def test_latest_download_prune_round_trip(self, store: ObjectStore, chunked_store: ObjectStore,
                                              tmp_path: Path):
        weights = os.urandom(12 * MB)  # three parts/chunks through chunked_store
        for step in (1, 2, 3):
            files = {"weights.bin": weights, "opt/state.bin": f"opt-{step}".encode()}
            upload(chunked_store, PREFIX, make_checkpoint(tmp_path / "local", f"step-{step}", step, **files),
                   attempt=2)

        newest = latest(store, PREFIX)
        assert newest is not None and (newest.name, newest.step, newest.attempt) == ("step-3", 3, 2)
        restored = download(chunked_store, PREFIX, newest, tmp_path / "restore")
        assert (restored / "weights.bin").read_bytes() == weights
        assert (restored / "opt" / "state.bin").read_bytes() == b"opt-3"
        assert (restored / COMPLETE).exists()

        deleted = prune(store, PREFIX, keep=1)
        assert [m.name for m in list_manifests(store, PREFIX)] == ["step-3"]
        assert sum("/blobs/" in k for k in deleted) == 4  # opt and COMPLETE of steps 1 and 2
        assert len(store.list(f"{PREFIX}/blobs/")) == 3  # the weights are still needed

    def test_a_crash_between_blobs_and_manifest_keeps_the_previous_checkpoint(self, store: ObjectStore,
                                                                               tmp_path: Path):
        upload(store, PREFIX, make_checkpoint(tmp_path, "step-1", 1, model=b"one"), attempt=1)
        with pytest.raises(OSError, match="simulated crash"):
            upload(CrashBeforeManifest(store), PREFIX, make_checkpoint(tmp_path, "step-2", 2, model=b"two"),
                   attempt=1)
        assert len(store.list(f"{PREFIX}/blobs/")) == 4  # step-2's orphan blobs are there ...
        newest = latest(store, PREFIX)
        assert newest is not None and newest.name == "step-1"  # ... but invisible
        assert (download(store, PREFIX, newest, tmp_path / "restore") / "model").read_bytes() == b"one"
        prune(store, PREFIX, keep=5)
        assert len(store.list(f"{PREFIX}/blobs/")) == 2  # the next prune collects them

    def test_open_store_url_gives_the_job_prefix(self, store: ObjectStore, store_url: str, tmp_path: Path):
        opened, prefix = open_store(f"{store_url}/team/ft-7")
        assert type(opened) is type(store) and prefix == "team/ft-7"
        upload(opened, prefix, make_checkpoint(tmp_path, "step-5", 5, model=b"m"), attempt=1)
        assert store.list("team/ft-7/manifests/") == ["team/ft-7/manifests/000000000001-step-5.json"]
