"""S3Store against a local moto S3: the shared ObjectStore contract, URLs and configuration,
multipart transfers, and error translation."""

from __future__ import annotations

import os
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from moto_s3 import Requests

from gpuorch.checkpoint import ObjectNotFound, open_store
from gpuorch.testing.store_contract import ObjectStoreContract
from gpuorch_aws.store import S3Store

pytestmark = pytest.mark.aws
MB = 1 << 20


class TestS3StoreContract(ObjectStoreContract):
    """The same contract FileStore keeps; the ``store`` fixture is an empty bucket (conftest)."""

    def test_list_paginates(self, store: S3Store, monkeypatch: pytest.MonkeyPatch):
        keys = [f"p/{i:04d}" for i in range(25)]
        for key in keys:
            store.put_bytes(key, b"")
        real = store.client.get_paginator

        def small_pages(name: str):  # type: ignore[no-untyped-def]
            paginator = real(name)
            paginate = paginator.paginate
            paginator.paginate = lambda **kw: paginate(PaginationConfig={"PageSize": 10}, **kw)
            return paginator

        monkeypatch.setattr(store.client, "get_paginator", small_pages)
        requests = Requests(store)
        assert store.list("p/") == keys
        assert requests.count("ListObjectsV2") == 3


def test_open_store_reads_bucket_prefix_and_endpoint(s3_env):
    store, prefix = open_store("s3://my-bucket/team/jobs/")
    assert isinstance(store, S3Store)
    assert (store.bucket, prefix, store.endpoint_url) == ("my-bucket", "team/jobs", s3_env.endpoint_url)
    assert open_store("s3://my-bucket")[1] == ""


@pytest.mark.parametrize("url", ["s3:///prefix", "s3://bucket/p?versionId=1"])
def test_rejects_malformed_urls(url: str, s3_env):
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        open_store(url)


def test_part_size_and_concurrency_from_env_or_arguments(s3_env, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUORCH_S3_PART_SIZE_MB", "8")
    monkeypatch.setenv("GPUORCH_S3_CONCURRENCY", "3")
    store = S3Store("b")
    assert (store.transfer.multipart_chunksize, store.transfer.max_concurrency) == (8 * MB, 3)
    store = S3Store("b", part_size_mb=6, max_concurrency=2)
    assert (store.transfer.multipart_chunksize, store.transfer.max_concurrency) == (6 * MB, 2)
    monkeypatch.setenv("GPUORCH_S3_PART_SIZE_MB", "4")
    with pytest.raises(ValueError, match="GPUORCH_S3_PART_SIZE_MB to 5 or more"):
        S3Store("b")
    monkeypatch.setenv("GPUORCH_S3_PART_SIZE_MB", "lots")
    with pytest.raises(ValueError, match="not a whole number"):
        S3Store("b")


def test_big_files_move_as_parallel_multipart_transfers(bucket: str, tmp_path: Path):
    store = S3Store(bucket, part_size_mb=5, max_concurrency=4)
    requests = Requests(store)
    src = tmp_path / "weights.bin"
    src.write_bytes(os.urandom(12 * MB))  # 5 + 5 + 2 MB parts
    store.put_file("blobs/w", src)
    assert requests.count("CreateMultipartUpload") == 1
    assert requests.count("UploadPart") == 3
    assert requests.count("CompleteMultipartUpload") == 1 and requests.count("PutObject") == 0

    requests.clear()
    dst = tmp_path / "restored.bin"
    store.get_file("blobs/w", dst)
    assert requests.count("GetObject") == 3  # ranged GETs, one per part
    assert dst.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["restored.bin", "weights.bin"]  # no temp left


def test_small_files_are_one_put(store: S3Store, requests: Requests, tmp_path: Path):
    src = tmp_path / "adapter.bin"
    src.write_bytes(b"x" * 1000)
    store.put_file("blobs/a", src)
    assert [op for op, _ in requests.calls] == ["PutObject"]


def test_exists_is_one_head_request(store: S3Store, requests: Requests):
    store.put_bytes("k", b"v")
    requests.clear()
    assert store.exists("k") and not store.exists("missing")
    assert [op for op, _ in requests.calls] == ["HeadObject", "HeadObject"]


def test_get_file_of_a_missing_key_leaves_nothing(store: S3Store, tmp_path: Path):
    with pytest.raises(ObjectNotFound, match="no object 'nope'"):
        store.get_file("nope", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_bucket_is_an_os_error_not_a_missing_object(s3_env):
    store = S3Store("no-such-bucket")
    with pytest.raises(OSError, match="NoSuchBucket") as info:
        store.get_bytes("k")
    assert not isinstance(info.value, KeyError)


def test_an_unreachable_endpoint_is_an_os_error(s3_env):
    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                          config=Config(retries={"max_attempts": 1}, connect_timeout=1))
    store = S3Store("b", client=client)
    with pytest.raises(OSError, match="Could not connect"):
        store.exists("k")
