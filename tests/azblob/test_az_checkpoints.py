"""The checkpoint protocol (gpuorch.checkpoint.sync) over AzureBlobStore on a local Azurite: the
shared ``CheckpointProtocolContract`` (gpuorch.testing.store_contract), plus how big
files travel as staged blocks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from azurite import Requests

from gpuorch.checkpoint import upload
from gpuorch.testing.store_contract import PREFIX, CheckpointProtocolContract, make_checkpoint
from gpuorch_azure.store import AzureBlobStore

pytestmark = pytest.mark.azure
MB = 1 << 20


class BlobWrites:
    """Blobs written: a single Put Blob, or the Put Block List that commits staged blocks."""

    def __init__(self, requests: Requests) -> None:
        self.requests = requests

    def keys(self) -> list[str]:
        return self.requests.keys("PutBlob", "PutBlockList")

    def clear(self) -> None:
        self.requests.clear()


class TestAzureCheckpoints(CheckpointProtocolContract):
    @pytest.fixture
    def chunked_store(self, container: str) -> AzureBlobStore:
        return AzureBlobStore(container, block_size_mb=5)

    @pytest.fixture
    def writes(self, requests: Requests) -> BlobWrites:
        return BlobWrites(requests)

    @pytest.fixture
    def store_url(self, container: str) -> str:
        return f"az://{container}@devstoreaccount1"


def test_big_files_are_staged_blocks_committed_once_and_sent_once(container: str, tmp_path: Path):
    weights = os.urandom(3 * MB)
    requests = Requests()
    blocks = AzureBlobStore(container, block_size_mb=1, client_options=requests.options())
    for step in (1, 2, 3):
        files = {"weights.bin": weights, "opt/state.bin": f"opt-{step}".encode()}
        upload(blocks, PREFIX, make_checkpoint(tmp_path / "local", f"step-{step}", step, **files), attempt=2)
    assert requests.count("PutBlock") == 3 and requests.count("PutBlockList") == 1  # the weights, once
    requests.clear()
    upload(blocks, PREFIX, tmp_path / "local" / "step-3", attempt=2)  # idempotent: not even a staged block
    assert requests.keys("PutBlob", "PutBlock", "PutBlockList") == []
