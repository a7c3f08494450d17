"""The checkpoint protocol (gpuorch.checkpoint.sync) over AzureBlobStore on a local Azurite:
incremental upload, staged-block blobs, restore, pruning, and manifest-last visibility."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from azurite import Requests

from gpuorch.checkpoint import COMPLETE, download, latest, list_manifests, open_store, prune, upload
from gpuorch.checkpoint.azstore import AzureBlobStore

pytestmark = pytest.mark.azure
MB = 1 << 20
PREFIX = "jobs/ft-1"


def make_checkpoint(root: Path, name: str, step: int, **files: bytes) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for rel, data in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    (d / COMPLETE).write_text(json.dumps({"step": step}))
    return d


def blob_puts(requests: Requests) -> list[str]:
    """Blobs written (a single Put Blob, or the Put Block List that commits staged blocks)."""
    return [k for k in requests.keys("PutBlob", "PutBlockList") if "/blobs/" in k]


def test_unchanged_files_are_not_sent_again(store: AzureBlobStore, requests: Requests, tmp_path: Path):
    base = os.urandom(MB)  # frozen weights, the same in every checkpoint
    base_key = f"{PREFIX}/blobs/{hashlib.sha256(base).hexdigest()}"
    upload(store, PREFIX, make_checkpoint(tmp_path, "step-1", 1, base=base, adapter=b"a1"), attempt=1)
    assert len(blob_puts(requests)) == 3 and base_key in blob_puts(requests)  # base, adapter, COMPLETE

    requests.clear()
    m2 = upload(store, PREFIX, make_checkpoint(tmp_path, "step-2", 2, base=base, adapter=b"a2"), attempt=1)
    assert len(blob_puts(requests)) == 2 and base_key not in blob_puts(requests)  # adapter, COMPLETE
    assert requests.keys("PutBlob")[-1] == m2.key(PREFIX)  # the manifest goes last

    requests.clear()
    again = upload(store, PREFIX, tmp_path / "step-2", attempt=1)  # idempotent: nothing written
    assert again == m2 and requests.keys("PutBlob", "PutBlock", "PutBlockList") == []


def test_latest_download_prune_round_trip(store: AzureBlobStore, tmp_path: Path):
    weights = os.urandom(3 * MB)
    requests = Requests()
    blocks = AzureBlobStore(store.container_name, block_size_mb=1, client_options=requests.options())
    for step in (1, 2, 3):
        files = {"weights.bin": weights, "opt/state.bin": f"opt-{step}".encode()}
        upload(blocks, PREFIX, make_checkpoint(tmp_path / "local", f"step-{step}", step, **files), attempt=2)
    assert requests.count("PutBlock") == 3 and requests.count("PutBlockList") == 1  # the weights, once

    newest = latest(store, PREFIX)
    assert newest is not None and (newest.name, newest.step, newest.attempt) == ("step-3", 3, 2)
    restored = download(blocks, PREFIX, newest, tmp_path / "restore")
    assert (restored / "weights.bin").read_bytes() == weights
    assert (restored / "opt" / "state.bin").read_bytes() == b"opt-3"
    assert (restored / COMPLETE).exists()

    deleted = prune(store, PREFIX, keep=1)
    assert [m.name for m in list_manifests(store, PREFIX)] == ["step-3"]
    assert sum("/blobs/" in k for k in deleted) == 4  # opt and COMPLETE of steps 1 and 2
    assert len(store.list(f"{PREFIX}/blobs/")) == 3  # the weights are still needed


class CrashBeforeManifest(AzureBlobStore):
    """Dies after sending the blobs, before the manifest: the process killed mid-upload."""

    def put_bytes(self, key: str, data: bytes) -> None:
        if "/manifests/" in key:
            raise OSError("simulated crash before the manifest")
        super().put_bytes(key, data)


def test_a_crash_between_blobs_and_manifest_keeps_the_previous_checkpoint(store: AzureBlobStore, tmp_path: Path):
    upload(store, PREFIX, make_checkpoint(tmp_path, "step-1", 1, model=b"one"), attempt=1)
    crashing = CrashBeforeManifest(store.container_name)
    with pytest.raises(OSError, match="simulated crash"):
        upload(crashing, PREFIX, make_checkpoint(tmp_path, "step-2", 2, model=b"two"), attempt=1)
    assert len(store.list(f"{PREFIX}/blobs/")) == 4  # step-2's orphan blobs are there ...
    newest = latest(store, PREFIX)
    assert newest is not None and newest.name == "step-1"  # ... but invisible
    assert (download(store, PREFIX, newest, tmp_path / "restore") / "model").read_bytes() == b"one"
    prune(store, PREFIX, keep=5)
    assert len(store.list(f"{PREFIX}/blobs/")) == 2  # the next prune collects them


def test_open_store_url_gives_the_job_prefix(container: str, tmp_path: Path):
    store, prefix = open_store(f"az://{container}@devstoreaccount1/team/ft-7")
    upload(store, prefix, make_checkpoint(tmp_path, "step-5", 5, model=b"m"), attempt=1)
    assert store.list("team/ft-7/manifests/") == ["team/ft-7/manifests/000000000001-step-5.json"]
