"""``S3Store``: the ObjectStore on Amazon S3 (or any S3-compatible service), ``s3://bucket/prefix``.

Registered for the ``s3`` scheme (entry point group ``gpuorch.stores``) and shipped to
instances in the agent bundle. The module imports without boto3 (the registry reads the class's
``provider`` and ``extra``); boto3 is imported when a store is built, so a missing one surfaces
from ``open_store`` as "install the aws extra". Credentials come from boto3's standard chain —
on an instance, its instance profile; never copied keys.

Atomicity is S3's own: an object appears only when its PutObject or CompleteMultipartUpload
succeeds, and a failed multipart upload is aborted by boto3's transfer manager. Large files move
as parallel multipart uploads and ranged downloads (``TransferConfig``).

Environment knobs (constructor arguments win):

- ``GPUORCH_S3_ENDPOINT_URL``: another endpoint (MinIO, moto in tests); path-style addressing
  is used whenever an endpoint is set, since such services rarely resolve bucket subdomains.
- ``GPUORCH_S3_PART_SIZE_MB`` (default 16, at least 5: S3's minimum part) and
  ``GPUORCH_S3_CONCURRENCY`` (default 8): multipart part size and parallel parts per file.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore, bucket_and_prefix, env_int
from gpuorch.checkpoint.url import StoreUrl

if TYPE_CHECKING:
    import boto3
    import boto3.exceptions
    import botocore.exceptions
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

MB = 1 << 20
DEFAULT_PART_SIZE_MB = 16  # big enough for S3's 10,000-part limit up to ~160 GB (boto3 grows it beyond)
MIN_PART_SIZE_MB = 5  # S3 rejects smaller multipart parts (except the last)
DEFAULT_CONCURRENCY = 8
_MISSING = {"404", "NoSuchKey", "NotFound"}
_DENIED = {"403", "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


def _import_sdk() -> None:
    """Bind boto3's modules as this module's globals (ModuleNotFoundError without the aws extra)."""
    global boto3, botocore, TransferConfig, Config
    import boto3
    import boto3.exceptions
    import boto3.session
    import botocore.exceptions
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config


class S3Store(ObjectStore):
    """One bucket. Keys are object keys in it; ``from_url`` returns the URL's path as the prefix.

    The boto3 client is created on first use (thread-safe; boto3 clients may be shared by
    threads), so opening a store costs no network round trip.
    """

    provider = "aws"
    extra = "aws"

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        part_size_mb: int | None = None,
        max_concurrency: int | None = None,
        client: Any = None,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 store needs a bucket: write s3://bucket/prefix")
        _import_sdk()
        self.bucket = bucket
        self.endpoint_url = endpoint_url or os.environ.get("GPUORCH_S3_ENDPOINT_URL") or None
        self.region = region
        part_mb = part_size_mb or env_int("GPUORCH_S3_PART_SIZE_MB", DEFAULT_PART_SIZE_MB)
        if part_mb < MIN_PART_SIZE_MB:
            raise ValueError(f"S3 part size {part_mb} MB is too small; set GPUORCH_S3_PART_SIZE_MB to 5 or more")
        concurrency = max_concurrency or env_int("GPUORCH_S3_CONCURRENCY", DEFAULT_CONCURRENCY)
        self.transfer = TransferConfig(
            multipart_threshold=part_mb * MB,
            multipart_chunksize=part_mb * MB,
            max_concurrency=max(1, concurrency),
            preferred_transfer_client="classic",  # honour the part size even if awscrt is installed
        )
        self._client = client
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: StoreUrl | str) -> tuple[S3Store, str]:
        bucket, prefix = bucket_and_prefix(url, "s3")
        return cls(bucket), prefix

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3Store({self.bucket!r}{where})"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                s3_options = {"addressing_style": "path"} if self.endpoint_url else {}
                config = Config(s3=s3_options, retries={"mode": "standard", "max_attempts": 5})
                with _SESSION_LOCK:  # sessions are not thread-safe; the clients they make are
                    self._client = _session().client(
                        "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
                    )
            return self._client

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        """Translate SDK errors at the boundary: ObjectNotFound, PermissionError, else OSError."""
        try:
            yield
        except botocore.exceptions.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in _MISSING:
                raise ObjectNotFound(f"no object {key!r} in {self!r}") from None
            if code in _DENIED:
                raise PermissionError(f"{self!r}: access denied to {key!r} ({code}); check the "
                                      "instance profile or credentials") from e
            raise OSError(f"{self!r}: {key!r}: {e}") from e
        except (botocore.exceptions.BotoCoreError, boto3.exceptions.Boto3Error) as e:
            # Connection failures, missing credentials, a multipart upload that failed (and was aborted).
            raise OSError(f"{self!r}: {key!r}: {e}") from e

    def put_file(self, key: str, path: Path) -> None:
        with self._errors(key):
            self.client.upload_file(str(path), self.bucket, key, Config=self.transfer)

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._errors(key):
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get_file(self, key: str, path: Path) -> None:
        # Download beside the target and rename, so ``path`` never holds a partial object.
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.close(fd)
        try:
            with self._errors(key):
                self.client.download_file(self.bucket, key, tmp, Config=self.transfer)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_bytes(self, key: str) -> bytes:
        with self._errors(key):
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data

    def exists(self, key: str) -> bool:
        """One HEAD request, no body: cheap enough to probe many keys."""
        try:
            with self._errors(key):
                self.client.head_object(Bucket=self.bucket, Key=key)
        except ObjectNotFound:
            return False
        return True

    def list(self, prefix: str = "") -> builtins.list[str]:
        keys: builtins.list[str] = []
        with self._errors(prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                keys.extend(obj["Key"] for obj in page.get("Contents", ()))
        return sorted(keys)  # S3 lists in UTF-8 byte order already; sorting keeps the contract explicit

    def delete(self, key: str) -> None:
        with self._errors(key):  # S3 answers 204 for a missing key too: quiet by nature
            self.client.delete_object(Bucket=self.bucket, Key=key)


_SESSION_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _session() -> boto3.session.Session:
    """One session per process: it caches the service models and the resolved credentials,
    which makes every client after the first cheap (a fresh session costs ~0.5 s)."""
    return boto3.session.Session()
