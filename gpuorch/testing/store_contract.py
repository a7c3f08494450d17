"""The contract suites every checkpoint store passes, shipped for adapters (and third-party
stores) to run: ``ObjectStoreContract`` (the ``ObjectStore`` port's docstring, sentence by
sentence) and ``CheckpointProtocolContract`` (``gpuorch.checkpoint.sync`` over the store:
incremental upload, big blobs in parts, restore, pruning, manifest-last visibility).

A store's test module subclasses them (names starting with ``Test``) and provides fixtures,
fsspec's abstract-tests model::

    class TestMyStore(ObjectStoreContract):
        @pytest.fixture
        def store(self): ...  # an empty store

    class TestMyStoreCheckpoints(CheckpointProtocolContract):
        # store: an empty store (a fresh bucket)
        # chunked_store: a second store on the same bucket whose big files move in 5 MB parts
        # writes: what ``store`` writes, ``Writes``-shaped (``RecordedWrites(store)`` records
        #         any store's puts; a cloud test may count requests on the wire instead)
        # store_url: the URL of the bucket's root (s3://bucket, az://container@account, ...)

Requires pytest (a dev dependency); nothing outside tests imports this module.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Protocol

import pytest

from gpuorch.checkpoint import (
    COMPLETE,
    ObjectNotFound,
    ObjectStore,
    download,
    latest,
    list_manifests,
    open_store,
    prune,
    upload,
)
from gpuorch.checkpoint.url import StoreUrl


class ObjectStoreContract:
    """The ``ObjectStore`` port's contract; fixture ``store``: an empty store."""

    def test_bytes_round_trip_and_overwrite(self, store: ObjectStore):
        store.put_bytes("a/b/c.json", b"one")
        store.put_bytes("a/b/c.json", b"two")
        assert store.get_bytes("a/b/c.json") == b"two"
        assert store.exists("a/b/c.json") and not store.exists("a/b")

    def test_file_round_trip(self, store: ObjectStore, tmp_path: Path):
        src = tmp_path / "src.bin"
        src.write_bytes(bytes(range(256)) * 1000)
        store.put_file("blobs/x", src)
        dst = tmp_path / "out" / "dst.bin"
        dst.parent.mkdir()
        store.get_file("blobs/x", dst)
        assert dst.read_bytes() == src.read_bytes()

    def test_missing_key_raises_object_not_found(self, store: ObjectStore, tmp_path: Path):
        with pytest.raises(ObjectNotFound):
            store.get_bytes("nope")
        with pytest.raises(KeyError):  # ObjectNotFound is a KeyError
            store.get_file("nope", tmp_path / "x")
        assert not (tmp_path / "x").exists() and not store.exists("nope")

    def test_list_is_a_sorted_string_prefix_match(self, store: ObjectStore):
        for key in ("m/2", "m/1", "m/10/x", "mm", "n"):
            store.put_bytes(key, b"")
        assert store.list("m/") == ["m/1", "m/10/x", "m/2"]
        assert store.list("m/1") == ["m/1", "m/10/x"]
        assert store.list("m") == ["m/1", "m/10/x", "m/2", "mm"]
        assert store.list("") == ["m/1", "m/10/x", "m/2", "mm", "n"]
        assert store.list("zzz/") == []

    def test_delete_is_quiet_when_absent(self, store: ObjectStore):
        store.put_bytes("k", b"v")
        store.delete("k")
        store.delete("k")
        assert not store.exists("k") and store.list("") == []

    def test_readers_never_see_a_partial_object(self, store: ObjectStore):
        old, new = b"a" * (4 << 20), b"b" * (4 << 20)
        store.put_bytes("big", old)
        seen: set[bytes] = set()
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                seen.add(store.get_bytes("big")[::65536])

        reader = threading.Thread(target=read)
        reader.start()
        for i in range(10):
            store.put_bytes("big", new if i % 2 == 0 else old)
        stop.set()
        reader.join()
        assert seen <= {old[::65536], new[::65536]}


MB = 1 << 20
PREFIX = "jobs/ft-1"


class Writes(Protocol):
    """What a store wrote, for ``CheckpointProtocolContract``'s ``writes`` fixture."""

    def keys(self) -> list[str]:
        """Keys of the objects written (one entry per object put), in order."""

    def clear(self) -> None: ...


class RecordedWrites:
    """``Writes`` for any store: wraps the instance's ``put_*`` methods (its type is unchanged)."""

    def __init__(self, store: ObjectStore) -> None:
        self._keys: builtins.list[str] = []
        for name in ("put_bytes", "put_file"):
            put = getattr(store, name)

            def record(key: str, data: object, _put: object = put) -> None:
                self._keys.append(key)
                _put(key, data)  # type: ignore[operator]

            setattr(store, name, record)

    def keys(self) -> builtins.list[str]:
        return list(self._keys)

    def clear(self) -> None:
        self._keys.clear()


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
    def from_url(cls, url: StoreUrl) -> tuple[ObjectStore, str]:
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
    """The checkpoint protocol over one store; fixtures ``store``, ``chunked_store``, ``writes``
    and ``store_url`` (module docstring)."""

    # The URL's path is a key prefix in the bucket (cloud stores); a file:// store roots itself
    # at the path instead, with an empty prefix.
    URL_PATH_IS_KEY_PREFIX = True

    def test_unchanged_files_are_not_sent_again(self, store: ObjectStore, writes: Writes, tmp_path: Path):
        base = os.urandom(MB)  # frozen weights, the same in every checkpoint
        base_key = f"{PREFIX}/blobs/{hashlib.sha256(base).hexdigest()}"
        upload(store, PREFIX, make_checkpoint(tmp_path, "step-1", 1, base=base, adapter=b"a1"), attempt=1)
        written = writes.keys()  # a list in write order (``Writes``), not a dict view
        blobs = [k for k in written if "/blobs/" in k]
        assert len(blobs) == 3 and base_key in blobs  # base, adapter, COMPLETE

        writes.clear()
        m2 = upload(store, PREFIX, make_checkpoint(tmp_path, "step-2", 2, base=base, adapter=b"a2"), attempt=1)
        written = writes.keys()
        blobs = [k for k in written if "/blobs/" in k]
        assert len(blobs) == 2 and base_key not in blobs  # adapter, COMPLETE
        assert written[-1] == m2.key(PREFIX)  # the manifest goes last

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
        assert type(opened) is type(store)
        assert prefix == ("team/ft-7" if self.URL_PATH_IS_KEY_PREFIX else "")
        upload(opened, prefix, make_checkpoint(tmp_path, "step-5", 5, model=b"m"), attempt=1)
        assert store.list("team/ft-7/manifests/") == ["team/ft-7/manifests/000000000001-step-5.json"]
