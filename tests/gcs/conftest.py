"""Fixtures for the GCS store tests: one gcp-storage-emulator per session, a fresh bucket per test.

Nothing here reaches Google: the SDK talks to the emulator (``STORAGE_EMULATOR_HOST``, anonymous
credentials), and google-auth's environment is emptied so nothing could find real credentials.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gcs_emulator import EmulatorUnavailable, GcsEmulator, Requests

from gpuorch_gcp.store import GCSStore


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    try:
        server = GcsEmulator(tmp_path_factory.mktemp("gcs"))
    except EmulatorUnavailable as e:
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture
def gcs_env(gcs_emulator: GcsEmulator, monkeypatch: pytest.MonkeyPatch,
            tmp_path_factory: pytest.TempPathFactory) -> GcsEmulator:
    """Point the SDK (and ``open_store``) at the emulator; hide any real Google credentials."""
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GPUORCH_GCS_ENDPOINT_URL",
                 "GPUORCH_GCS_CHUNK_SIZE_MB", "GPUORCH_GCS_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path_factory.mktemp("gcloud")))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # never ask a real metadata server
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    for name, value in gcs_emulator.env.items():
        monkeypatch.setenv(name, value)
    return gcs_emulator


@pytest.fixture
def bucket(gcs_env: GcsEmulator) -> str:
    return gcs_env.new_bucket()


@pytest.fixture
def store(bucket: str) -> GCSStore:
    return GCSStore(bucket)


@pytest.fixture
def requests(store: GCSStore) -> Requests:
    return Requests(store)
