"""The ObjectStore contract, and open_store.

``ObjectStoreContract`` is the shared suite: a new store (s3, gs, az) subclasses it and provides
a ``store`` fixture for an empty store, as ``TestFileStore`` does (fsspec's abstract-tests model).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from gpuorch.checkpoint import STORES, ObjectNotFound, ObjectStore, UnsupportedStore, open_store
from gpuorch.checkpoint.filestore import FileStore
from gpuorch.checkpoint.store import not_implemented

# Which stores this gpuorch ships is read from STORES, not listed here: stores land one by one.
SHIPPED = [s for s in STORES if not_implemented(s) is None]


class ObjectStoreContract:
    def test_bytes_round_trip_and_overwrite(self, store: ObjectStore):
        store.put_bytes("a/b/c.json", b"one")
        store.put_bytes("a/b/c.json", b"two")
        assert store.get_bytes("a/b/c.json") == b"two"
        assert store.exists("a/b/c.json") and not store.exists("a/b")

    def test_file_round_trip(self, store: ObjectStore, tmp_path: Path):
        src = tmp_path / "src.bin"
        src.write_bytes(bytes(range(256)) * 1000)
        store.put_file("blobs/x", src)
        dst = tmp_path / "out" / "dst.bin"
        dst.parent.mkdir()
        store.get_file("blobs/x", dst)
        assert dst.read_bytes() == src.read_bytes()

    def test_missing_key_raises_object_not_found(self, store: ObjectStore, tmp_path: Path):
        with pytest.raises(ObjectNotFound):
            store.get_bytes("nope")
        with pytest.raises(KeyError):  # ObjectNotFound is a KeyError
            store.get_file("nope", tmp_path / "x")
        assert not (tmp_path / "x").exists() and not store.exists("nope")

    def test_list_is_a_sorted_string_prefix_match(self, store: ObjectStore):
        for key in ("m/2", "m/1", "m/10/x", "mm", "n"):
            store.put_bytes(key, b"")
        assert store.list("m/") == ["m/1", "m/10/x", "m/2"]
        assert store.list("m/1") == ["m/1", "m/10/x"]
        assert store.list("m") == ["m/1", "m/10/x", "m/2", "mm"]
        assert store.list("") == ["m/1", "m/10/x", "m/2", "mm", "n"]
        assert store.list("zzz/") == []

    def test_delete_is_quiet_when_absent(self, store: ObjectStore):
        store.put_bytes("k", b"v")
        store.delete("k")
        store.delete("k")
        assert not store.exists("k") and store.list("") == []

    def test_readers_never_see_a_partial_object(self, store: ObjectStore):
        old, new = b"a" * (4 << 20), b"b" * (4 << 20)
        store.put_bytes("big", old)
        seen: set[bytes] = set()
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                seen.add(store.get_bytes("big")[::65536])

        reader = threading.Thread(target=read)
        reader.start()
        for i in range(10):
            store.put_bytes("big", new if i % 2 == 0 else old)
        stop.set()
        reader.join()
        assert seen <= {old[::65536], new[::65536]}


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
    module = STORES[scheme][0].partition(":")[0]
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
    monkeypatch.setitem(STORES, "az", ("gpuorch.checkpoint.not_here:Store", "azure"))
    usable = ", ".join(f"{s}://" for s in SHIPPED if s != "az")
    with pytest.raises(UnsupportedStore, match=rf"^az:// checkpoint stores are not implemented in this gpuorch "
                                               rf"yet; use {usable}$"):
        open_store("az://c@acct/p")
