"""``AzureBlobStore``: the ObjectStore on Azure Blob Storage, ``az://container@account/prefix``.

Registered for the ``az`` scheme (entry point group ``gpuorch.stores``) and shipped to
instances in the agent bundle. The module imports without the Azure SDK (the registry reads the
class's ``provider`` and ``extra``); ``azure-storage-blob`` and ``azure-identity`` are imported
when a store is built, so a missing one surfaces from ``open_store`` as "install the azure
extra". This module is the only one that imports the storage SDK.

**Where the account comes from.** ``az://container@account/prefix`` names it in the URL (the
``abfs://``/``wasbs://`` convention), which is what a job spec should use: the agent on an
instance sees only the URL. ``az://container/prefix`` takes the account from
``GPUORCH_AZURE_STORAGE_ACCOUNT``. An account with a dot is a host
(``container@acct.blob.core.chinacloudapi.cn``, a private endpoint); a bare name means
``https://<account>.blob.core.windows.net``.

**Credentials** come only from azure-identity's ``DefaultAzureCredential`` chain: environment,
workload identity, managed identity (on an instance: its managed identity; ``AZURE_CLIENT_ID``
picks one of several user-assigned ones), Azure CLI... Never account keys or SAS tokens in
URLs. The one exception is ``GPUORCH_AZURE_STORAGE_CONNECTION_STRING``, for a **local
emulator (Azurite) and the tests only**: it must carry a ``BlobEndpoint`` that is not an Azure
host, and it is refused otherwise.

Atomicity is Azure's own: a blob becomes visible (or replaces the old one) only when its single
Put Blob, or the Put Block List that commits its staged blocks, succeeds. Blocks staged by a
failed upload stay uncommitted and invisible; Azure discards them after a week.

Environment knobs (constructor arguments win):

- ``GPUORCH_AZURE_BLOCK_SIZE_MB`` (default 16, 1 to 4000): a file bigger than that moves as
  staged blocks of that size (grown for a file that would need more than Azure's 50,000 blocks),
  and downloads as ranged GETs of that size.
- ``GPUORCH_AZURE_CONCURRENCY`` (default 8): blocks or ranges in flight per file.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore, env_int
from gpuorch.checkpoint.url import StoreUrl, store_url

if TYPE_CHECKING:
    from azure.core.exceptions import (
        AzureError,
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
    )
    from azure.identity import CredentialUnavailableError, DefaultAzureCredential
    from azure.storage.blob import BlobServiceClient, ContainerClient

MB = 1 << 20
DEFAULT_BLOCK_SIZE_MB = 16  # 16 MiB x 50,000 blocks: single files up to ~780 GiB before it grows
MAX_BLOCK_SIZE_MB = 4000  # Azure's largest block (service version 2019-12-12 and later)
MAX_BLOCKS = 50_000  # committed blocks per blob
DEFAULT_CONCURRENCY = 8
CONNECTION_STRING_ENV = "GPUORCH_AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT_ENV = "GPUORCH_AZURE_STORAGE_ACCOUNT"
_AZURE_HOST_SUFFIXES = (".windows.net", ".chinacloudapi.cn", ".usgovcloudapi.net", ".cloudapi.de")
_URL_FORM = "write az://container@account/prefix (or az://container/prefix with GPUORCH_AZURE_STORAGE_ACCOUNT set)"



def _import_sdk() -> None:
    """Bind the SDK's names as this module's globals (ModuleNotFoundError without the azure extra)."""
    global AzureError, ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
    global CredentialUnavailableError, DefaultAzureCredential, BlobServiceClient, ContainerClient
    from azure.core.exceptions import (
        AzureError,
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
    )
    from azure.identity import CredentialUnavailableError, DefaultAzureCredential
    from azure.storage.blob import BlobServiceClient, ContainerClient


class AzureBlobStore(ObjectStore):
    """One container. Keys are blob names in it; ``from_url`` returns the URL's path as the prefix.

    ``account``: a storage account name, or a blob endpoint host (with a dot). Without it, the
    account comes from ``GPUORCH_AZURE_STORAGE_ACCOUNT``, or the emulator connection string.
    ``client_options``: extra keyword arguments for the SDK client (``retry_total``,
    ``connection_timeout``, ``raw_request_hook``...). ``container_client``: a ready
    ``ContainerClient`` to use as is (its own block settings then apply).

    The SDK client is created on first use (and is shared by threads), so opening a store costs
    no network round trip and no credential lookup.
    """

    provider = "azure"
    extra = "azure"

    def __init__(
        self,
        container: str,
        *,
        account: Optional[str] = None,
        block_size_mb: Optional[int] = None,
        max_concurrency: Optional[int] = None,
        client_options: Optional[Mapping[str, Any]] = None,
        container_client: Any = None,
    ) -> None:
        if not container:
            raise ValueError(f"an Azure store needs a container: {_URL_FORM}")
        _import_sdk()
        self.container_name = container
        self.connection_string = os.environ.get(CONNECTION_STRING_ENV, "").strip() or None
        emulator_account = _check_emulator(self.connection_string) if self.connection_string else None
        account = account or os.environ.get(ACCOUNT_ENV, "").strip() or emulator_account
        if not account:
            raise ValueError(f"no storage account for az://{container}: {_URL_FORM}")
        self.account: str = account
        if emulator_account and self.account != emulator_account:
            raise ValueError(f"az:// account {self.account!r} is not the emulator's ({emulator_account!r}) "
                             f"that {CONNECTION_STRING_ENV} points at; unset it to reach a real account")
        self.block_size_mb = block_size_mb or env_int("GPUORCH_AZURE_BLOCK_SIZE_MB", DEFAULT_BLOCK_SIZE_MB)
        if not 1 <= self.block_size_mb <= MAX_BLOCK_SIZE_MB:
            raise ValueError(f"Azure block size {self.block_size_mb} MB is out of range; set "
                             f"GPUORCH_AZURE_BLOCK_SIZE_MB between 1 and {MAX_BLOCK_SIZE_MB}")
        self.max_concurrency = max(1, max_concurrency or env_int("GPUORCH_AZURE_CONCURRENCY", DEFAULT_CONCURRENCY))
        self.client_options: Dict[str, Any] = dict(client_options or {})
        self._given = container_client
        self._clients: Dict[int, ContainerClient] = {}  # by block size in bytes
        self._credential: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: Union[StoreUrl, str]) -> Tuple[AzureBlobStore, str]:
        try:
            parsed = store_url(url)
        except ValueError:
            raise ValueError(f"cannot read store URL {str(url)!r}; {_URL_FORM}") from None
        if parsed.scheme != "az" or not parsed.host or parsed.extras:
            raise ValueError(f"cannot read store URL {parsed.raw!r}; {_URL_FORM}")
        if "@" in parsed.host:
            if not parsed.bucket or not parsed.account:
                raise ValueError(f"cannot read store URL {parsed.raw!r}; {_URL_FORM}")
            return cls(parsed.bucket, account=parsed.account), parsed.prefix
        return cls(parsed.bucket), parsed.prefix

    def __repr__(self) -> str:
        where = "emulator" if self.connection_string else "account"
        return f"AzureBlobStore({self.container_name!r}, {where}={self.account!r})"

    @property
    def account_url(self) -> str:
        if "." in self.account:
            return f"https://{self.account}"
        return f"https://{self.account}.blob.core.windows.net"

    @property
    def container(self) -> ContainerClient:
        """The SDK client for this store's block size."""
        return self._client(self.block_size_mb * MB)

    def _client(self, block_size: int) -> ContainerClient:
        if self._given is not None:
            return self._given
        with self._lock:
            client = self._clients.get(block_size)
            if client is None:
                options: Dict[str, Any] = dict(
                    max_single_put_size=block_size, max_block_size=block_size,
                    max_single_get_size=block_size, max_chunk_get_size=block_size,
                )
                options.update(self.client_options)
                if self.connection_string:
                    service = BlobServiceClient.from_connection_string(self.connection_string, **options)
                else:
                    if self._credential is None:
                        self._credential = DefaultAzureCredential()
                    service = BlobServiceClient(self.account_url, credential=self._credential, **options)
                client = self._clients[block_size] = service.get_container_client(self.container_name)
            return client

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        """Translate SDK errors at the boundary: ObjectNotFound, PermissionError, else OSError."""
        try:
            yield
        except ResourceNotFoundError as e:
            if _code(e) == "ContainerNotFound":
                raise OSError(f"{self!r}: container {self.container_name!r} does not exist; create it "
                              "or fix the store URL") from e
            raise ObjectNotFound(f"no object {key!r} in {self!r}") from None
        except CredentialUnavailableError as e:  # no identity at all, as boto3's NoCredentialsError
            raise OSError(f"{self!r}: {key!r}: no Azure credentials ({_first_line(e)}); on an instance, "
                          "assign it a managed identity") from e
        except ClientAuthenticationError as e:
            raise PermissionError(f"{self!r}: not authenticated for {key!r} ({_first_line(e)}); check the "
                                  "managed identity or credentials") from e
        except HttpResponseError as e:
            if e.status_code == 403:
                raise PermissionError(f"{self!r}: access denied to {key!r} ({_code(e)}); give the managed "
                                      "identity the Storage Blob Data Contributor role on the container") from e
            raise OSError(f"{self!r}: {key!r}: {_first_line(e)}") from e
        except AzureError as e:  # connection failures, timeouts
            raise OSError(f"{self!r}: {key!r}: {_first_line(e)}") from e

    def put_file(self, key: str, path: Path) -> None:
        size = os.path.getsize(path)
        block = self.block_size_mb * MB
        if size > block * MAX_BLOCKS:  # grow the blocks (in whole MiB) rather than fail at block 50,001
            block = -(-size // (MAX_BLOCKS * MB)) * MB
        with self._errors(key), open(path, "rb") as f:
            self._client(block).upload_blob(key, f, length=size, overwrite=True, max_concurrency=self.max_concurrency)

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._errors(key):
            self.container.upload_blob(key, data, length=len(data), overwrite=True,
                                       max_concurrency=self.max_concurrency)

    def get_file(self, key: str, path: Path) -> None:
        # Download beside the target and rename, so ``path`` never holds a partial object. The
        # SDK pins the ranged GETs after the first to its ETag: a blob replaced meanwhile fails.
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as f, self._errors(key):
                self.container.download_blob(key, max_concurrency=self.max_concurrency).readinto(f)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_bytes(self, key: str) -> bytes:
        with self._errors(key):
            data: bytes = self.container.download_blob(key, max_concurrency=self.max_concurrency).readall()
        return data

    def exists(self, key: str) -> bool:
        """One HEAD request (Get Blob Properties). Staged, uncommitted blocks do not count. A
        missing container is an ``OSError``, not a missing object."""
        try:
            with self._errors(key):
                self.container.get_blob_client(key).get_blob_properties()
        except ObjectNotFound:
            return False
        return True

    def list(self, prefix: str = "") -> builtins.list[str]:
        with self._errors(prefix):  # the SDK follows the continuation markers
            keys = [blob.name for blob in self.container.list_blobs(name_starts_with=prefix or None)]
        return sorted(keys)  # Azure lists in name order already; sorting keeps the contract explicit

    def delete(self, key: str) -> None:
        try:
            with self._errors(key):
                self.container.delete_blob(key, delete_snapshots="include")
        except ObjectNotFound:
            pass


def _check_emulator(connection_string: str) -> str:
    """The emulator's account name; ValueError for a connection string to a real account."""
    fields = {}
    for part in connection_string.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            fields[name.strip().lower()] = value.strip()
    host = (urlsplit(fields.get("blobendpoint", "")).hostname or "").lower()
    if not host or host.endswith(_AZURE_HOST_SUFFIXES):
        raise ValueError(f"{CONNECTION_STRING_ENV} is only for a local emulator (a BlobEndpoint such as "
                         "http://127.0.0.1:10000/devstoreaccount1); real accounts use DefaultAzureCredential "
                         "(a managed identity on instances): unset it and write az://container@account/prefix")
    account = fields.get("accountname")
    if not account:
        raise ValueError(f"{CONNECTION_STRING_ENV} has no AccountName")
    return account


def _code(e: HttpResponseError) -> str:
    """The storage error code, which the blob SDK sets on its errors (azure-core's own lack it)."""
    code = getattr(e, "error_code", None)
    return str(getattr(code, "value", code))


def _first_line(e: BaseException) -> str:
    text = str(getattr(e, "message", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
