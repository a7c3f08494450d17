"""AzureBlobStore against a local Azurite: the shared ObjectStore contract, URLs, account and
credential selection, configuration, staged-block transfers, and error translation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from azure.identity import CredentialUnavailableError, DefaultAzureCredential
from azure.storage.blob import ContainerClient
from azurite import ACCOUNT, Azurite, Requests

from gpuorch.checkpoint import ObjectNotFound, open_store
from gpuorch.testing.store_contract import ObjectStoreContract
from gpuorch_azure import store as azstore
from gpuorch_azure.store import AzureBlobStore

pytestmark = pytest.mark.azure
MB = 1 << 20
REAL_ACCOUNT_KEY = "a2V5"  # any base64: these tests never send a request with it


class TestAzureBlobStoreContract(ObjectStoreContract):
    """The same contract FileStore and S3Store keep; ``store`` is an empty container (conftest)."""

    def test_list_follows_continuation_markers(self, store: AzureBlobStore, requests: Requests,
                                               monkeypatch: pytest.MonkeyPatch):
        keys = [f"p/{i:04d}" for i in range(25)]
        for key in keys:
            store.put_bytes(key, b"")
        real = store.container.list_blobs
        monkeypatch.setattr(store.container, "list_blobs", lambda **kw: real(results_per_page=10, **kw))
        requests.clear()
        assert store.list("p/") == keys
        assert requests.count("ListBlobs") == 3


# -- URLs, accounts and credentials (no request is sent) ------------------------------------------


def test_the_url_names_container_account_and_prefix():
    store, prefix = open_store("az://ckpt@myaccount/team/jobs/")
    assert isinstance(store, AzureBlobStore)
    assert (store.container_name, store.account, prefix) == ("ckpt", "myaccount", "team/jobs")
    assert store.container.url == "https://myaccount.blob.core.windows.net/ckpt"
    assert open_store("az://ckpt@myaccount")[1] == ""


def test_an_account_with_a_dot_is_the_blob_endpoint_host():
    store, _ = open_store("az://ckpt@acct.blob.core.chinacloudapi.cn/p")
    assert store.container.url == "https://acct.blob.core.chinacloudapi.cn/ckpt"


def test_without_an_account_in_the_url_it_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ValueError, match=r"^no storage account for az://ckpt: write az://container@account/prefix"):
        open_store("az://ckpt/p")
    monkeypatch.setenv("GPUORCH_AZURE_STORAGE_ACCOUNT", "envaccount")
    store, prefix = open_store("az://ckpt/p")
    assert (store.account, prefix) == ("envaccount", "p")
    assert open_store("az://ckpt@urlaccount/p")[0].account == "urlaccount"  # the URL wins


def test_credentials_come_from_the_default_azure_credential_chain():
    store, _ = open_store("az://ckpt@myaccount/p")
    assert isinstance(store.container.credential, DefaultAzureCredential)
    assert store.container.credential is store._client(MB).credential  # one credential per store


@pytest.mark.parametrize("url", ["az:///prefix", "az://@acct/p", "az://ckpt@/p", "az://ckpt:key@acct/p",
                                 "az://ckpt@acct/p?sv=2024&sig=x", "az://ckpt@acct/p#f"])
def test_rejects_malformed_urls(url: str):
    with pytest.raises(ValueError, match="write az://container@account/prefix"):
        open_store(url)


@pytest.mark.parametrize("connection_string", [
    f"DefaultEndpointsProtocol=https;AccountName=prod;AccountKey={REAL_ACCOUNT_KEY};EndpointSuffix=core.windows.net",
    f"AccountName=prod;AccountKey={REAL_ACCOUNT_KEY};BlobEndpoint=https://prod.blob.core.windows.net/",
    f"AccountName=prod;AccountKey={REAL_ACCOUNT_KEY};BlobEndpoint=https://prod.blob.core.usgovcloudapi.net",
])
def test_the_connection_string_is_refused_for_a_real_account(connection_string: str,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUORCH_AZURE_STORAGE_CONNECTION_STRING", connection_string)
    with pytest.raises(ValueError, match=r"GPUORCH_AZURE_STORAGE_CONNECTION_STRING is only for a local "
                                         r"emulator .* real accounts use DefaultAzureCredential"):
        open_store("az://ckpt@prod/p")


def test_the_emulator_connection_string_does_not_redirect_another_account(az_env: Azurite):
    assert open_store(f"az://ckpt@{ACCOUNT}/p")[0].account == ACCOUNT
    assert open_store("az://ckpt/p")[0].account == ACCOUNT
    with pytest.raises(ValueError, match="account 'prod' is not the emulator's"):
        open_store("az://ckpt@prod/p")


def test_block_size_and_concurrency_from_env_or_arguments(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUORCH_AZURE_BLOCK_SIZE_MB", "8")
    monkeypatch.setenv("GPUORCH_AZURE_CONCURRENCY", "3")
    store = AzureBlobStore("c", account="a")
    assert (store.block_size_mb, store.max_concurrency) == (8, 3)
    config = store.container._config
    assert (config.max_block_size, config.max_single_put_size, config.max_chunk_get_size) == (8 * MB,) * 3
    store = AzureBlobStore("c", account="a", block_size_mb=2, max_concurrency=2)
    assert (store.block_size_mb, store.max_concurrency, store.container._config.max_block_size) == (2, 2, 2 * MB)
    monkeypatch.setenv("GPUORCH_AZURE_BLOCK_SIZE_MB", "4001")
    with pytest.raises(ValueError, match="set GPUORCH_AZURE_BLOCK_SIZE_MB between 1 and 4000"):
        AzureBlobStore("c", account="a")
    monkeypatch.setenv("GPUORCH_AZURE_BLOCK_SIZE_MB", "lots")
    with pytest.raises(ValueError, match="not a whole number"):
        AzureBlobStore("c", account="a")


# -- transfers -------------------------------------------------------------------------------------


def test_big_files_move_as_staged_blocks_in_parallel(container: str, requests: Requests, tmp_path: Path):
    store = AzureBlobStore(container, block_size_mb=1, max_concurrency=4, client_options=requests.options())
    src = tmp_path / "weights.bin"
    src.write_bytes(os.urandom(3 * MB + 1000))  # 1 + 1 + 1 MB blocks and a short last one
    requests.gate("PutBlock")  # the first two blocks must be in flight together
    store.put_file("blobs/w", src)
    assert requests.count("PutBlock") == 4 and requests.count("PutBlockList") == 1
    assert requests.count("PutBlob") == 0

    requests.clear()
    requests.gate("GetBlob", after=1)  # the first GET learns the size; the other three go together
    dst = tmp_path / "restored.bin"
    store.get_file("blobs/w", dst)
    assert requests.count("GetBlob") == 4  # ranged GETs, one per block
    assert dst.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["restored.bin", "weights.bin"]  # no temp left


def test_a_file_beyond_the_block_limit_gets_bigger_blocks(container: str, requests: Requests, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(azstore, "MAX_BLOCKS", 2)  # Azure's is 50,000: the same arithmetic, smaller
    store = AzureBlobStore(container, block_size_mb=1, client_options=requests.options())
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(3 * MB + 1))  # would be 4 blocks of 1 MB: too many
    store.put_file("big", src)
    assert requests.count("PutBlock") == 2  # 2 MB blocks
    assert store.get_bytes("big") == src.read_bytes()


def test_small_files_are_one_put(store: AzureBlobStore, requests: Requests, tmp_path: Path):
    src = tmp_path / "adapter.bin"
    src.write_bytes(b"x" * 1000)
    store.put_file("blobs/a", src)
    assert requests.calls == [("PutBlob", "blobs/a")]


def test_exists_is_one_head_request(store: AzureBlobStore, requests: Requests):
    store.put_bytes("k", b"v")
    requests.clear()
    assert store.exists("k") and not store.exists("missing")
    assert [op for op, _ in requests.calls] == ["GetBlobProperties", "GetBlobProperties"]


def test_uncommitted_blocks_are_invisible(store: AzureBlobStore):
    """What a crash mid-upload leaves: staged blocks, no blob."""
    blob = store.container.get_blob_client("partial")
    blob.stage_block("YmxvY2stMQ==", b"half of it")
    assert not store.exists("partial") and store.list("") == []
    with pytest.raises(ObjectNotFound):
        store.get_bytes("partial")


# -- errors ----------------------------------------------------------------------------------------


def test_get_file_of_a_missing_key_leaves_nothing(store: AzureBlobStore, tmp_path: Path):
    with pytest.raises(ObjectNotFound, match="no object 'nope'"):
        store.get_file("nope", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_container_is_an_os_error_not_a_missing_object(az_env: Azurite):
    store = AzureBlobStore("no-such-container")
    for call in (lambda: store.get_bytes("k"), lambda: store.exists("k"), lambda: store.put_bytes("k", b""),
                 lambda: store.list("")):
        with pytest.raises(OSError, match="container 'no-such-container' does not exist") as info:
            call()
        assert not isinstance(info.value, KeyError)


def test_a_wrong_key_is_a_permission_error(azurite: Azurite, container: str, monkeypatch: pytest.MonkeyPatch):
    wrong = azurite.connection_string.replace(azurite.connection_string.split("AccountKey=")[1].split(";")[0],
                                              "d3Jvbmcta2V5LXdyb25nLWtleQ==")
    monkeypatch.setenv("GPUORCH_AZURE_STORAGE_CONNECTION_STRING", wrong)
    store = AzureBlobStore(container, client_options={"retry_total": 0})
    with pytest.raises(PermissionError, match="(access denied to|not authenticated for) 'k'"):
        store.get_bytes("k")


def test_an_unreachable_endpoint_is_an_os_error(monkeypatch: pytest.MonkeyPatch, azurite: Azurite):
    monkeypatch.setenv("GPUORCH_AZURE_STORAGE_CONNECTION_STRING",
                       azurite.connection_string.replace(azurite.endpoint, f"http://127.0.0.1:9/{ACCOUNT}"))
    store = AzureBlobStore("c", client_options={"retry_total": 0, "connection_timeout": 2})
    with pytest.raises(OSError, match="'k': .*(refused|connect)") as info:
        store.exists("k")
    assert not isinstance(info.value, PermissionError)


class NoIdentity:
    """A credential chain that finds nothing: DefaultAzureCredential on a machine without one."""

    def get_token(self, *scopes, **kwargs):  # type: ignore[no-untyped-def]
        raise CredentialUnavailableError("DefaultAzureCredential failed to retrieve a token")

    get_token_info = get_token


def test_no_credentials_is_an_os_error_naming_the_managed_identity():
    # Fails before connecting; no retries (the SDK retries even this, with backoff).
    client = ContainerClient("https://127.0.0.1:9", "c", credential=NoIdentity(), retry_total=0)
    store = AzureBlobStore("c", account="acct", container_client=client)
    with pytest.raises(OSError, match="no Azure credentials .* assign it a managed identity") as info:
        store.exists("k")
    assert not isinstance(info.value, PermissionError)
