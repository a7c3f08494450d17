"""Fixtures for the S3 store tests: one moto S3 server per session, a fresh bucket per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto_s3 import MotoS3, Requests

from gpuorch_aws.store import S3Store


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3()
    yield server
    server.stop()


@pytest.fixture
def s3_env(moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> MotoS3:
    """Point boto3 (and ``open_store``) at the moto server with fake credentials."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "GPUORCH_S3_PART_SIZE_MB",
                 "GPUORCH_S3_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in moto_s3.env.items():
        monkeypatch.setenv(name, value)
    return moto_s3


@pytest.fixture
def bucket(s3_env: MotoS3) -> str:
    return s3_env.new_bucket()


@pytest.fixture
def store(bucket: str) -> S3Store:
    return S3Store(bucket)


@pytest.fixture
def requests(store: S3Store) -> Requests:
    return Requests(store)
