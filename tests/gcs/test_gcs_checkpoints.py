"""The checkpoint protocol (gpuorch.checkpoint.sync) over GCSStore on a local gcp-storage-emulator:
the shared ``CheckpointProtocolContract`` (gpuorch.testing.store_contract)."""

from __future__ import annotations

import pytest
from gcs_emulator import Requests

from gpuorch.testing.store_contract import CheckpointProtocolContract
from gpuorch_gcp.store import GCSStore

pytestmark = pytest.mark.gcp


class GcsWrites:
    def __init__(self, requests: Requests) -> None:
        self.requests = requests

    def keys(self) -> list[str]:
        return self.requests.uploads()

    def clear(self) -> None:
        self.requests.clear()


class TestGcsCheckpoints(CheckpointProtocolContract):
    @pytest.fixture
    def chunked_store(self, bucket: str) -> GCSStore:
        return GCSStore(bucket, chunk_size_mb=5)

    @pytest.fixture
    def writes(self, requests: Requests) -> GcsWrites:
        return GcsWrites(requests)

    @pytest.fixture
    def store_url(self, bucket: str) -> str:
        return f"gs://{bucket}"
