"""The checkpoint protocol (gpuorch.checkpoint.sync) over S3Store on a local moto S3: the shared
``CheckpointProtocolContract`` (gpuorch.testing.store_contract), plus S3's multipart."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from moto_s3 import Requests

from gpuorch.checkpoint import download, latest, upload
from gpuorch.testing.store_contract import PREFIX, CheckpointProtocolContract, make_checkpoint
from gpuorch_aws.store import S3Store

pytestmark = pytest.mark.aws
MB = 1 << 20


class S3Writes:
    def __init__(self, requests: Requests) -> None:
        self.requests = requests

    def keys(self) -> list[str]:
        return self.requests.keys("PutObject", "CreateMultipartUpload")

    def clear(self) -> None:
        self.requests.clear()


class TestS3Checkpoints(CheckpointProtocolContract):
    @pytest.fixture
    def chunked_store(self, bucket: str) -> S3Store:
        return S3Store(bucket, part_size_mb=5)

    @pytest.fixture
    def writes(self, requests: Requests) -> S3Writes:
        return S3Writes(requests)

    @pytest.fixture
    def store_url(self, bucket: str) -> str:
        return f"s3://{bucket}"


def test_a_big_blob_moves_in_parts_through_the_protocol(bucket: str, tmp_path: Path):
    weights = os.urandom(12 * MB)
    store = S3Store(bucket, part_size_mb=5)
    requests = Requests(store)
    upload(store, PREFIX, make_checkpoint(tmp_path / "local", "step-1", 1, **{"weights.bin": weights}), attempt=1)
    assert requests.count("UploadPart") == 3 and requests.count("CreateMultipartUpload") == 1
    requests.clear()
    newest = latest(store, PREFIX)
    assert newest is not None
    assert (download(store, PREFIX, newest, tmp_path / "restore") / "weights.bin").read_bytes() == weights
    weights_key = f"{PREFIX}/blobs/{hashlib.sha256(weights).hexdigest()}"
    assert requests.keys("GetObject").count(weights_key) == 3  # ranged GETs, one per part
