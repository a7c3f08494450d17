"""``GCSStore``: the ObjectStore on Google Cloud Storage, ``gs://bucket/prefix``.

Registered for the ``gs`` scheme (entry point group ``gpuorch.stores``) and shipped to
instances in the agent bundle. The module imports without google-cloud-storage (the registry
reads the class's ``provider`` and ``extra``); the SDK is imported when a store is built, so a
missing one surfaces from ``open_store`` as "install the gcp extra". Credentials come only from
google-auth's default chain — on a VM, its service account; never copied keys.

Atomicity is GCS's own: an object appears only when its upload (single request, or the last
chunk of a resumable session) completes; an abandoned resumable session leaves nothing visible.
Files above one chunk are uploaded as resumable sessions in chunks and downloaded as parallel
ranged reads pinned to the object's generation (the SDK's ``transfer_manager``, threads).

Environment knobs (constructor arguments win):

- ``STORAGE_EMULATOR_HOST`` (the SDK's own, e.g. ``http://127.0.0.1:9023``): an emulator,
  reached without credentials (anonymous), as the SDK does for it.
- ``GPUORCH_GCS_ENDPOINT_URL``: another authenticated endpoint (a Private Service Connect
  endpoint, say); credentials still come from the default chain.
- ``GPUORCH_GCS_CHUNK_SIZE_MB`` (default 16; resumable-upload chunk and ranged-read size) and
  ``GPUORCH_GCS_CONCURRENCY`` (default 8): parallel ranged reads per file.

Written for the instance's Python too (3.8+, google-cloud-storage 2.16+).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Tuple, Type, Union

from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore, bucket_and_prefix, env_int
from gpuorch.checkpoint.url import StoreUrl

if TYPE_CHECKING:
    import google.api_core.exceptions as api_exceptions
    import google.auth.exceptions as auth_exceptions
    from google.cloud import storage
    from google.cloud.storage import transfer_manager

MB = 1 << 20
DEFAULT_CHUNK_SIZE_MB = 16
DEFAULT_CONCURRENCY = 8
SDK_RETRY: Any = "the SDK's DEFAULT_RETRY"  # the constructor's default: the SDK is not imported yet
# The SDK's own errors at the boundary: API answers, auth, transport, the media layer (bound by
# ``_import_sdk``).
_SDK_ERRORS: Tuple[Type[BaseException], ...] = ()
_DEFAULT_RETRY: Any = None  # the SDK's DEFAULT_RETRY, once bound


def _import_sdk() -> None:
    """Bind the SDK's modules as this module's globals (ModuleNotFoundError without the gcp extra)."""
    global api_exceptions, auth_exceptions, storage, transfer_manager, _SDK_ERRORS, _DEFAULT_RETRY
    import google.api_core.exceptions as api_exceptions
    import google.auth.exceptions as auth_exceptions
    import requests.exceptions
    from google.cloud import storage
    from google.cloud.storage import transfer_manager
    from google.cloud.storage.retry import DEFAULT_RETRY as _DEFAULT_RETRY

    try:  # google-cloud-storage 3.x carries the media layer itself ...
        from google.cloud.storage.exceptions import DataCorruption, InvalidResponse
    except ImportError:  # pragma: no cover - ... 2.x uses google-resumable-media
        from google.resumable_media.common import DataCorruption, InvalidResponse
    _SDK_ERRORS = (api_exceptions.GoogleAPIError, auth_exceptions.GoogleAuthError,
                   requests.exceptions.RequestException, InvalidResponse, DataCorruption)


class GCSStore(ObjectStore):
    """One bucket. Keys are object names in it; ``from_url`` returns the URL's path as the prefix.

    The storage client is created on first use (thread-safe; a client may be shared by
    threads), so opening a store costs no network round trip. ``retry`` (default: the SDK's
    ``DEFAULT_RETRY``: 429, 5xx and connection errors with backoff, 120 s deadline) applies to
    every request, uploads included: a repeated put writes the same bytes to the same key.
    """

    provider = "gcp"
    extra = "gcp"

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: Optional[str] = None,
        chunk_size_mb: Optional[int] = None,
        max_concurrency: Optional[int] = None,
        retry: Any = SDK_RETRY,
        client: Any = None,
    ) -> None:
        if not bucket:
            raise ValueError("a GCS store needs a bucket: write gs://bucket/prefix")
        _import_sdk()
        self.bucket_name = bucket
        self.endpoint_url = endpoint_url or os.environ.get("GPUORCH_GCS_ENDPOINT_URL") or None
        chunk_mb = chunk_size_mb or env_int("GPUORCH_GCS_CHUNK_SIZE_MB", DEFAULT_CHUNK_SIZE_MB)
        if chunk_mb < 1:
            raise ValueError(f"GCS chunk size {chunk_mb} MB is too small; set GPUORCH_GCS_CHUNK_SIZE_MB to 1 or more")
        self.chunk_size = chunk_mb * MB  # a multiple of 256 KiB, as resumable uploads require
        self.max_concurrency = max(1, max_concurrency or env_int("GPUORCH_GCS_CONCURRENCY", DEFAULT_CONCURRENCY))
        self.retry = _DEFAULT_RETRY if retry is SDK_RETRY else retry
        self._client = client
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: Union[StoreUrl, str]) -> tuple[GCSStore, str]:
        bucket, prefix = bucket_and_prefix(url, "gs")
        return cls(bucket), prefix

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"GCSStore({self.bucket_name!r}{where})"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                options = {"api_endpoint": self.endpoint_url} if self.endpoint_url else None
                # project=None: no project lookup; object reads and writes do not need one.
                self._client = storage.Client(project=None, client_options=options)
            return self._client

    @property
    def bucket(self) -> Any:
        return self.client.bucket(self.bucket_name)

    @contextlib.contextmanager
    def _errors(self, key: str, *, missing_is_object: bool = True) -> Iterator[None]:
        """Translate SDK errors at the boundary: ObjectNotFound, PermissionError, else OSError."""
        try:
            yield
        except api_exceptions.NotFound as e:
            if missing_is_object and not _names_the_bucket(e):
                raise ObjectNotFound(f"no object {key!r} in {self!r}") from None
            raise OSError(f"{self!r}: {key!r}: {e}") from e
        except (api_exceptions.Forbidden, api_exceptions.Unauthorized) as e:
            raise PermissionError(f"{self!r}: access denied to {key!r} ({e.code}); check the VM's "
                                  "service account and its roles on the bucket") from e
        except auth_exceptions.DefaultCredentialsError as e:
            raise OSError(f"{self!r}: no Google credentials found ({e}); on a VM give it a service "
                          "account, elsewhere set GOOGLE_APPLICATION_CREDENTIALS") from e
        except auth_exceptions.RefreshError as e:
            raise PermissionError(f"{self!r}: {key!r}: the credentials were refused ({e}); check the "
                                  "service account and the VM's access scopes") from e
        except _SDK_ERRORS as e:  # connection failures, a retry deadline, corrupt or odd responses
            raise OSError(f"{self!r}: {key!r}: {e}") from e

    def put_file(self, key: str, path: Path) -> None:
        with self._errors(key, missing_is_object=False):
            blob = self.bucket.blob(key, chunk_size=self.chunk_size)  # resumable above 8 MiB
            blob.upload_from_filename(str(path), retry=self.retry)

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._errors(key, missing_is_object=False):
            blob = self.bucket.blob(key, chunk_size=self.chunk_size)
            blob.upload_from_string(data, content_type="application/octet-stream", retry=self.retry)

    def get_file(self, key: str, path: Path) -> None:
        # Download beside the target and rename, so ``path`` never holds a partial object.
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.close(fd)
        try:
            with self._errors(key):
                blob = self.bucket.blob(key)
                blob.reload(retry=self.retry)  # size and generation: every range reads one version
                if blob.size is not None and blob.size > self.chunk_size and self.max_concurrency > 1:
                    transfer_manager.download_chunks_concurrently(
                        blob, tmp, chunk_size=self.chunk_size, worker_type=transfer_manager.THREAD,
                        max_workers=self.max_concurrency, download_kwargs={"retry": self.retry},
                    )
                else:
                    blob.download_to_filename(tmp, retry=self.retry)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def get_bytes(self, key: str) -> bytes:
        with self._errors(key):
            data: bytes = self.bucket.blob(key).download_as_bytes(retry=self.retry)
        return data

    def exists(self, key: str) -> bool:
        """One metadata GET, no body: cheap enough to probe many keys."""
        with self._errors(key):
            found: bool = self.bucket.blob(key).exists(retry=self.retry)
        return found

    def list(self, prefix: str = "") -> builtins.list[str]:
        with self._errors(prefix, missing_is_object=False):  # a 404 here is the bucket's
            blobs = self.client.list_blobs(self.bucket_name, prefix=prefix or None,
                                           fields="items(name),nextPageToken", retry=self.retry)
            keys = [blob.name for blob in blobs]
        return sorted(keys)  # GCS lists in lexicographic order already; sorting keeps the contract explicit

    def delete(self, key: str) -> None:
        try:
            with self._errors(key):
                self.bucket.blob(key).delete(retry=self.retry)
        except ObjectNotFound:
            pass  # quiet, as the port says (a retried delete may also find it gone)


def _names_the_bucket(error: api_exceptions.NotFound) -> bool:
    """Whether a 404 is about the bucket (GCS: "The specified bucket does not exist."), not the object."""
    return "bucket does not exist" in str(error.message).lower()
