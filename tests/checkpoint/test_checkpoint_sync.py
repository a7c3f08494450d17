"""The checkpoint protocol over a real FileStore: completeness, manifest-last, incremental upload,
verified download, pruning, and the handoff record."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from gpuorch.checkpoint import (
    COMPLETE,
    CorruptCheckpoint,
    IncompleteCheckpoint,
    complete_checkpoints,
    download,
    latest,
    list_manifests,
    prune,
    read_final,
    upload,
    wait_for_final,
    write_final,
)
from gpuorch.checkpoint.filestore import FileStore

BIG = os.urandom(2 << 20)  # "frozen weights": the same bytes in every checkpoint


class CountingStore(FileStore):
    """A FileStore that records puts, and can crash on a chosen key prefix."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.puts: list[str] = []
        self.crash_on: str | None = None

    def _write(self, key, fill) -> None:
        if self.crash_on and self.crash_on in key:
            raise OSError(f"simulated crash writing {key}")
        self.puts.append(key)
        super()._write(key, fill)


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(tmp_path / "store")


def make_checkpoint(root: Path, name: str, step: int | None = None, complete: bool = True, **files: bytes) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for rel, data in (files or {"model.bin": name.encode()}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    if complete:
        (d / COMPLETE).write_text(json.dumps({"step": step}) if step is not None else "")
    return d


def test_only_complete_checkpoints_count_ordered_by_step_then_time(tmp_path: Path):
    make_checkpoint(tmp_path, "step-20")  # step from the name
    make_checkpoint(tmp_path, "latest", step=5)  # step from COMPLETE's JSON
    make_checkpoint(tmp_path, "step-30", complete=False)  # still being written
    make_checkpoint(tmp_path, ".restore-x", step=99)  # a hidden staging dir
    a = make_checkpoint(tmp_path, "a-40")
    make_checkpoint(tmp_path, "b-40")
    os.utime(a / COMPLETE, (2e9, 2e9))  # same step: the later COMPLETE is newer
    assert [c.name for c in complete_checkpoints(tmp_path)] == ["latest", "step-20", "b-40", "a-40"]
    assert complete_checkpoints(tmp_path / "missing") == []


def test_an_incomplete_checkpoint_is_never_uploaded(store, tmp_path: Path):
    ckpt = make_checkpoint(tmp_path / "local", "step-1", complete=False)
    with pytest.raises(IncompleteCheckpoint, match="no COMPLETE file"):
        upload(store, "job", ckpt, attempt=1)
    assert store.list("") == []


def test_upload_then_download_round_trip(store, tmp_path: Path):
    ckpt = make_checkpoint(tmp_path / "local", "step-7", step=7, **{"w.bin": BIG, "sub/opt.json": b"{}"})
    os.utime(ckpt / COMPLETE, (1.7e9, 1.7e9))
    manifest = upload(store, "jobs/1", ckpt, attempt=3)
    assert (manifest.name, manifest.step, manifest.attempt, manifest.seq) == ("step-7", 7, 3, 1)
    assert store.puts[-1] == "jobs/1/manifests/000000000001-step-7.json"  # the manifest is written last
    assert latest(store, "jobs/1") == manifest

    restored = download(store, "jobs/1", manifest, tmp_path / "restore")
    assert restored == tmp_path / "restore" / "step-7"
    assert (restored / "w.bin").read_bytes() == BIG and (restored / "sub" / "opt.json").read_bytes() == b"{}"
    assert json.loads((restored / COMPLETE).read_text()) == {"step": 7}
    assert (restored / COMPLETE).stat().st_mtime == 1.7e9  # ordering survives the round trip
    assert [p.name for p in (tmp_path / "restore").iterdir()] == ["step-7"]  # no staging left


def test_a_crash_before_the_manifest_leaves_the_previous_checkpoint_visible(store, tmp_path: Path):
    first = upload(store, "", make_checkpoint(tmp_path, "step-1", **{"w.bin": b"1"}), attempt=1)
    store.crash_on = "manifests/"  # all blobs of step-2 go up, then the machine dies
    with pytest.raises(OSError, match="simulated crash"):
        upload(store, "", make_checkpoint(tmp_path, "step-2", **{"w.bin": b"2"}), attempt=1)
    assert latest(store, "") == first
    assert download(store, "", first, tmp_path / "restore").joinpath("w.bin").read_bytes() == b"1"


def test_unchanged_files_are_not_sent_again(store, tmp_path: Path):
    upload(store, "", make_checkpoint(tmp_path, "step-1", **{"frozen.bin": BIG, "adapter.bin": b"a1"}), attempt=1)
    store.puts.clear()
    second = upload(
        store, "", make_checkpoint(tmp_path, "step-2", **{"frozen.bin": BIG, "adapter.bin": b"a2"}), attempt=1
    )
    adapter = next(f.sha256 for f in second.files if f.path == "adapter.bin")
    # Only the changed file went up (frozen.bin and the empty COMPLETE were stored already).
    assert store.puts == [f"blobs/{adapter}", "manifests/000000000002-step-2.json"]


def test_uploading_the_same_checkpoint_twice_is_a_no_op(store, tmp_path: Path):
    ckpt = make_checkpoint(tmp_path, "step-1")
    first = upload(store, "", ckpt, attempt=1)
    store.puts.clear()
    assert upload(store, "", ckpt, attempt=2) == first
    assert store.puts == [] and len(list_manifests(store, "")) == 1


def test_download_detects_a_corrupt_blob(store, tmp_path: Path):
    manifest = upload(store, "", make_checkpoint(tmp_path, "step-1", **{"w.bin": b"weights"}), attempt=1)
    sha = next(f.sha256 for f in manifest.files if f.path == "w.bin")
    (store.root / "blobs" / sha).write_bytes(b"bit rot")
    with pytest.raises(CorruptCheckpoint, match=rf"w.bin has sha256 .* blob blobs/{sha} is corrupt"):
        download(store, "", manifest, tmp_path / "restore")
    assert list((tmp_path / "restore").iterdir()) == []  # nothing half-restored


def test_download_detects_a_missing_blob_and_unsafe_paths(store, tmp_path: Path):
    manifest = upload(store, "", make_checkpoint(tmp_path, "step-1"), attempt=1)
    store.delete(f"blobs/{manifest.files[0].sha256}")
    with pytest.raises(CorruptCheckpoint, match="is missing"):
        download(store, "", manifest, tmp_path / "restore")
    manifest.files[0] = type(manifest.files[0])("../escape", 1, "0" * 64)
    with pytest.raises(CorruptCheckpoint, match="unsafe file path"):
        download(store, "", manifest, tmp_path / "restore")


def test_download_replaces_a_stale_local_copy(store, tmp_path: Path):
    manifest = upload(store, "", make_checkpoint(tmp_path / "a", "step-1", **{"w.bin": b"good"}), attempt=1)
    make_checkpoint(tmp_path / "b", "step-1", complete=False, **{"w.bin": b"torn", "junk": b"x"})
    restored = download(store, "", manifest, tmp_path / "b")
    assert sorted(p.name for p in restored.iterdir()) == [COMPLETE, "w.bin"]
    assert (restored / "w.bin").read_bytes() == b"good"


def test_prune_keeps_the_newest_and_every_blob_they_need(store, tmp_path: Path):
    for step in range(1, 6):
        upload(
            store,
            "p",
            make_checkpoint(tmp_path, f"step-{step}", **{"frozen.bin": BIG, "w": str(step).encode()}),
            attempt=1,
        )
    store.put_bytes("p/blobs/" + "f" * 64, b"orphan from a crashed upload")
    deleted = prune(store, "p", keep=2)
    kept = list_manifests(store, "p")
    assert [m.name for m in kept] == ["step-4", "step-5"]
    assert sum(k.startswith("p/manifests/") for k in deleted) == 3 and "p/blobs/" + "f" * 64 in deleted
    needed = {f.sha256 for m in kept for f in m.files}
    assert {k.rsplit("/", 1)[1] for k in store.list("p/blobs/")} == needed
    for m in kept:  # every kept checkpoint still restores
        assert (download(store, "p", m, tmp_path / "restore") / "frozen.bin").read_bytes() == BIG
    with pytest.raises(ValueError):
        prune(store, "p", keep=0)


def test_latest_is_none_for_an_empty_store(store):
    assert latest(store, "nothing") is None and list_manifests(store, "nothing") == []


def test_handoff_record(store):
    assert read_final(store, "j", 1) is None
    assert wait_for_final(store, "j", 1, deadline=time.time()) is None  # checks once, then gives up
    written = write_final(store, "j", 1, "step-9")
    assert read_final(store, "j", 1) == written and written.checkpoint == "step-9"
    assert store.list("j/") == ["j/attempts/1.final.json"]


def test_wait_for_final_returns_once_the_record_appears(store):
    writer = threading.Timer(0.2, write_final, args=(store, "j", 2, None))
    writer.start()
    record = wait_for_final(store, "j", 2, deadline=time.time() + 30, poll=0.05)
    writer.join()
    assert record is not None and (record.attempt, record.checkpoint) == (2, None)
