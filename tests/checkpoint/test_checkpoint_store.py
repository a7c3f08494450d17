"""FileStore through the shipped contracts (``gpuorch.testing.store_contract``), and open_store
over the ``gpuorch.stores`` registry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuorch.checkpoint import STORE_PLUGINS, UnsupportedStore, open_store, schemes
from gpuorch.checkpoint.filestore import FileStore
from gpuorch.testing.store_contract import CheckpointProtocolContract, ObjectStoreContract, RecordedWrites

# Which stores this gpuorch ships is read from the registry, not listed here.
SHIPPED = schemes()


class TestFileStore(ObjectStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> FileStore:
        return FileStore(tmp_path / "store")

    def test_a_failed_put_leaves_the_old_object_and_no_temp_file(self, store: FileStore):
        store.put_bytes("k", b"old")

        def half_then_crash(f) -> None:
            f.write(b"ne")
            raise OSError("disk full")

        with pytest.raises(OSError, match="disk full"):
            store._write("k", half_then_crash)
        assert store.get_bytes("k") == b"old"
        assert [p.name for p in store.root.rglob("*")] == ["k"]

    @pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", ".gpuorch-tmp-x"])
    def test_rejects_keys_outside_the_root(self, store: FileStore, key: str):
        with pytest.raises(ValueError, match="invalid object key"):
            store.put_bytes(key, b"")


class TestFileStoreCheckpoints(CheckpointProtocolContract):
    URL_PATH_IS_KEY_PREFIX = False  # file:///root/team/ft-7 is a store rooted there

    @pytest.fixture
    def store(self, tmp_path: Path) -> FileStore:
        return FileStore(tmp_path / "store")

    @pytest.fixture
    def chunked_store(self, store: FileStore) -> FileStore:
        return FileStore(store.root)  # a file moves whole; the same directory, another instance

    @pytest.fixture
    def writes(self, store: FileStore) -> RecordedWrites:
        return RecordedWrites(store)

    @pytest.fixture
    def store_url(self, store: FileStore) -> str:
        return store.root.as_uri()


def test_open_store_file_url(tmp_path: Path):
    store, prefix = open_store((tmp_path / "my store").as_uri())
    assert isinstance(store, FileStore) and store.root == tmp_path / "my store" and prefix == ""


@pytest.mark.parametrize("url", ["file://relative/path", "file://otherhost/x"])
def test_open_store_rejects_non_local_file_urls(url: str):
    with pytest.raises(ValueError, match="file:///absolute/path"):
        open_store(url)


@pytest.mark.parametrize("url, extra, sdk", [
    ("s3://b/p", "aws", "boto3"),
    ("gs://b/p", "gcp", "google"),
    ("az://c@acct/p", "azure", "azure.storage.blob"),
    ("az://c@acct/p", "azure", "azure.identity"),
])
def test_cloud_stores_name_the_extra_to_install(url: str, extra: str, sdk: str, monkeypatch: pytest.MonkeyPatch):
    scheme = url.split(":")[0]
    # The SDK may well be installed here (the S3 and GCS tests need it): make it look absent.
    monkeypatch.setitem(sys.modules, sdk, None)  # ``import`` of a None entry raises ModuleNotFoundError
    module = STORE_PLUGINS.module(scheme)
    if module in sys.modules:
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(
        UnsupportedStore,
        match=rf"^{scheme}:// checkpoint stores need the {extra} extra: "
        rf"pip install gpuorch\[{extra}\]$",
    ):
        open_store(url)


def test_the_shipped_stores_include_file_s3_gs_and_az():
    assert {"file", "s3", "gs", "az"} <= set(SHIPPED)


def test_unknown_scheme():
    known = ", ".join(f"{s}://" for s in SHIPPED)
    with pytest.raises(UnsupportedStore, match=f"use one of {known}$"):
        open_store("ftp://host/x")


def test_a_store_whose_module_is_missing_says_so_rather_than_blame_a_missing_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(STORE_PLUGINS.table, "az", "gpuorch_azure.not_here:AzureBlobStore")
    usable = ", ".join(f"{s}://" for s in SHIPPED if s != "az")
    with pytest.raises(UnsupportedStore, match=rf"^az:// checkpoint stores are not implemented in this gpuorch "
                                               rf"yet; use {usable}$"):
        open_store("az://c@acct/p")
