"""GCSStore against a local gcp-storage-emulator: the shared ObjectStore contract, URLs and
configuration, chunked (resumable) uploads and parallel ranged downloads, error translation."""

from __future__ import annotations

import os
from pathlib import Path

import google.api_core.exceptions as api_exceptions
import pytest
from gcs_emulator import GcsEmulator, Requests
from google.api_core.retry import Retry
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from gpuorch.checkpoint import ObjectNotFound, open_store
from gpuorch.testing.store_contract import ObjectStoreContract
from gpuorch_gcp.store import GCSStore

pytestmark = pytest.mark.gcp
MB = 1 << 20


class TestGcsStoreContract(ObjectStoreContract):
    """The same contract FileStore keeps; the ``store`` fixture is an empty bucket (conftest).

    (Paging is the SDK's iterator; the emulator ignores ``maxResults``, so it is not tested here.)"""


def test_open_store_reads_bucket_and_prefix(gcs_env: GcsEmulator):
    store, prefix = open_store("gs://my-bucket/team/jobs/")
    assert isinstance(store, GCSStore)
    assert (store.bucket_name, prefix, store.endpoint_url) == ("my-bucket", "team/jobs", None)
    assert open_store("gs://my-bucket")[1] == ""


@pytest.mark.parametrize("url", ["gs:///prefix", "gs://bucket/p?generation=1", "gs://bucket/p#x"])
def test_rejects_malformed_urls(url: str, gcs_env: GcsEmulator):
    with pytest.raises(ValueError, match="gs://bucket/prefix"):
        open_store(url)


def test_chunk_size_concurrency_and_endpoint_from_env_or_arguments(gcs_env: GcsEmulator,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUORCH_GCS_CHUNK_SIZE_MB", "8")
    monkeypatch.setenv("GPUORCH_GCS_CONCURRENCY", "3")
    monkeypatch.setenv("GPUORCH_GCS_ENDPOINT_URL", "https://storage-psc.p.example")
    store = GCSStore("b")
    assert (store.chunk_size, store.max_concurrency, store.endpoint_url) == (8 * MB, 3, "https://storage-psc.p.example")
    store = GCSStore("b", chunk_size_mb=6, max_concurrency=2, endpoint_url="http://127.0.0.1:1")
    assert (store.chunk_size, store.max_concurrency, store.endpoint_url) == (6 * MB, 2, "http://127.0.0.1:1")
    monkeypatch.setenv("GPUORCH_GCS_CHUNK_SIZE_MB", "0")
    with pytest.raises(ValueError, match="GPUORCH_GCS_CHUNK_SIZE_MB to 1 or more"):
        GCSStore("b")
    monkeypatch.setenv("GPUORCH_GCS_CHUNK_SIZE_MB", "lots")
    with pytest.raises(ValueError, match="not a whole number"):
        GCSStore("b")


def test_the_emulator_variable_means_anonymous_credentials(store: GCSStore):
    assert isinstance(store.client._credentials, AnonymousCredentials)  # nothing looked for real keys


def test_big_files_move_as_resumable_chunks_and_parallel_ranged_reads(bucket: str, tmp_path: Path):
    store = GCSStore(bucket, chunk_size_mb=5, max_concurrency=4)
    requests = Requests(store)
    src = tmp_path / "weights.bin"
    src.write_bytes(os.urandom(12 * MB))  # 5 + 5 + 2 MB chunks
    store.put_file("blobs/w", src)
    assert requests.count("POST", "/upload/", "uploadType=resumable") == 1  # one session ...
    assert requests.count("PUT", "/upload/", "upload_id=") == 3  # ... three chunks
    assert requests.count("POST", "/upload/", "uploadType=multipart") == 0

    requests.clear()
    dst = tmp_path / "restored.bin"
    store.get_file("blobs/w", dst)
    ranged = [q for m, p, q, name in requests.calls if m == "GET" and "alt=media" in q and name == "blobs/w"]
    assert len(ranged) == 3 and all("generation=" in q for q in ranged)  # one version, one read per chunk
    assert dst.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["restored.bin", "weights.bin"]  # no temp left


def test_small_files_are_one_request(store: GCSStore, requests: Requests, tmp_path: Path):
    src = tmp_path / "adapter.bin"
    src.write_bytes(b"x" * 1000)
    store.put_file("blobs/a", src)
    assert [(m, q.split("&")[0]) for m, _, q, _ in requests.calls] == [("POST", "uploadType=multipart")]
    requests.clear()
    assert store.get_bytes("blobs/a") == b"x" * 1000
    assert [m for m, *_ in requests.calls] == ["GET"]


def test_exists_is_one_metadata_request(store: GCSStore, requests: Requests):
    store.put_bytes("k", b"v")
    requests.clear()
    assert store.exists("k") and not store.exists("missing")
    assert [(m, "alt=media" in q) for m, _, q, _ in requests.calls] == [("GET", False), ("GET", False)]


def test_get_file_of_a_missing_key_leaves_nothing(store: GCSStore, tmp_path: Path):
    with pytest.raises(ObjectNotFound, match="no object 'nope'"):
        store.get_file("nope", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_listing_a_missing_bucket_is_an_os_error_not_an_empty_store(gcs_env: GcsEmulator):
    with pytest.raises(OSError, match="404") as info:
        GCSStore("no-such-bucket").list("jobs/")
    assert not isinstance(info.value, KeyError)


def test_a_404_naming_the_bucket_is_an_os_error_not_a_missing_object(store: GCSStore, monkeypatch: pytest.MonkeyPatch):
    # GCS says "The specified bucket does not exist." where the emulator says nothing: inject GCS's answer.
    def missing_bucket(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise api_exceptions.NotFound("GET https://storage.googleapis.com/storage/v1/b/x/o/k: "
                                      "The specified bucket does not exist.")

    monkeypatch.setattr(storage.Blob, "download_as_bytes", missing_bucket)
    with pytest.raises(OSError, match="bucket does not exist") as info:
        store.get_bytes("k")
    assert not isinstance(info.value, KeyError)


@pytest.mark.parametrize("error, expected", [
    (api_exceptions.Forbidden("denied"), PermissionError),
    (api_exceptions.Unauthorized("no"), PermissionError),
    (api_exceptions.ServiceUnavailable("later"), OSError),
])
def test_api_errors_are_translated(store: GCSStore, monkeypatch: pytest.MonkeyPatch, error: Exception,
                                   expected: type[Exception]):
    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise error

    monkeypatch.setattr(storage.Blob, "download_as_bytes", fail)
    with pytest.raises(expected) as info:
        store.get_bytes("k")
    assert not isinstance(info.value, KeyError) and info.value.__cause__ is error


def test_an_unreachable_endpoint_is_an_os_error(gcs_env: GcsEmulator):
    client = storage.Client(project="test", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": "http://127.0.0.1:9"})
    store = GCSStore("b", client=client, retry=None)
    with pytest.raises(OSError, match="127.0.0.1"):
        store.exists("k")


def test_connection_errors_are_retried_up_to_the_deadline(gcs_env: GcsEmulator):
    client = storage.Client(project="test", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": "http://127.0.0.1:9"})
    attempts: list[Exception] = []
    retry = Retry(initial=0.001, maximum=0.001, timeout=0.05, on_error=attempts.append,
                  predicate=lambda e: True)
    with pytest.raises(OSError):
        GCSStore("b", client=client, retry=retry).get_bytes("k")
    assert len(attempts) >= 2
