"""The object-store port: a flat blob store addressed by string keys, and ``open_store``.

Stdlib only: this package is shipped to cloud instances as-is (Python 3.8+). Cloud stores
(s3, gs, az) are extra ``ObjectStore`` implementations imported lazily by URL scheme through
``STORES``, so the agent never imports an SDK it does not need.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
from urllib.parse import urlsplit
from abc import ABC, abstractmethod
from pathlib import Path


class ObjectNotFound(KeyError):
    """``get_*`` of a key that does not exist."""

    def __str__(self) -> str:  # KeyError's default repr-quotes the message
        return str(self.args[0]) if self.args else "object not found"


class UnsupportedStore(ValueError):
    """A checkpoint store URL this installation cannot open (unknown scheme, missing extra)."""


class ObjectStore(ABC):
    """A flat blob store. Keys are ``/``-separated strings without leading ``/`` or ``..``.

    Contracts every implementation keeps (tested by ``tests/checkpoint``):

    - ``put_*`` is atomic: a reader sees the old object, the new one, or none, never a
      partial one; a put over an existing key replaces it.
    - ``list`` is a plain string-prefix match over keys (not a directory listing) and returns
      keys sorted; objects being written do not appear until their put has returned.
    - ``delete`` of a missing key is a quiet no-op.
    - Errors other than ``ObjectNotFound`` (network, permissions) propagate as ``OSError``.
    """

    @classmethod
    @abstractmethod
    def from_url(cls, url: str) -> tuple[ObjectStore, str]:
        """Open the store a URL names; return it and the key prefix the URL points at."""

    @abstractmethod
    def put_file(self, key: str, path: Path) -> None:
        """Store the contents of local file ``path`` under ``key`` (atomically)."""

    @abstractmethod
    def get_file(self, key: str, path: Path) -> None:
        """Write object ``key`` to local ``path`` (atomically). Raises ``ObjectNotFound``."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (atomically)."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """The object's contents. Raises ``ObjectNotFound``."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether a complete object is stored under ``key``."""

    @abstractmethod
    def list(self, prefix: str = "") -> builtins.list[str]:
        """All keys starting with ``prefix`` (any depth), sorted."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; quiet if it does not exist."""


def join_key(*parts: str) -> str:
    """Join key parts with ``/``, ignoring empty parts and stray slashes at the joins.

    A trailing ``/`` on the last part is kept, so ``join_key(p, "blobs/")`` lists a "folder".
    """
    key = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    return key + "/" if key and parts and parts[-1].endswith("/") else key


# scheme -> ("module:Class", pip extra). The class implements ``ObjectStore.from_url``.
# Cloud modules may import their SDK at module level: they are only imported for their scheme.
STORES: dict[str, tuple[str, str]] = {
    "file": ("gpuorch.checkpoint.filestore:FileStore", ""),
    "s3": ("gpuorch.checkpoint.s3:S3Store", "aws"),
    "gs": ("gpuorch.checkpoint.gcsstore:GCSStore", "gcp"),
    "az": ("gpuorch.checkpoint.azstore:AzureBlobStore", "azure"),
}


def _shipped(scheme: str) -> bool:
    return importlib.util.find_spec(STORES[scheme][0].partition(":")[0]) is not None


def not_implemented(scheme: str) -> str | None:
    """Why a known scheme's store cannot be used by this gpuorch (its module is not part of it
    yet), or None. Cheap: looks the module up without importing it or its SDK."""
    if scheme not in STORES or _shipped(scheme):
        return None
    usable = ", ".join(f"{s}://" for s in STORES if _shipped(s))
    return f"{scheme}:// checkpoint stores are not implemented in this gpuorch yet; use {usable}"


def open_store(url: str) -> tuple[ObjectStore, str]:
    """Open the store for ``url`` (``file:///abs/path``, ``s3://bucket/prefix``, ...).

    Returns ``(store, prefix)``: keys for this URL live under ``prefix`` (``join_key``).
    Raises ``UnsupportedStore`` with a one-line fix for unknown schemes or a missing extra.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in STORES:
        known = ", ".join(f"{s}://" for s in STORES if _shipped(s))
        raise UnsupportedStore(f"unsupported checkpoint store {url!r}; use one of {known}")
    missing = not_implemented(scheme)
    if missing:
        raise UnsupportedStore(missing)
    target, extra = STORES[scheme]
    module_name, _, class_name = target.partition(":")
    try:
        store_class: type[ObjectStore] = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError:  # the adapter or its SDK is not installed
        if not extra:
            raise
        raise UnsupportedStore(
            f"{scheme}:// checkpoint stores need the {extra} extra: pip install gpuorch[{extra}]"
        ) from None
    return store_class.from_url(url)


def env_int(name: str, default: int) -> int:
    """A whole-number knob from the environment (the agent reads the stores' knobs there)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None


def bucket_and_prefix(url: str, scheme: str) -> tuple[str, str]:
    """``scheme://bucket/prefix`` -> (bucket, prefix); ValueError naming the form otherwise."""
    parts = urlsplit(url)
    if parts.scheme != scheme or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"cannot read store URL {url!r}; write {scheme}://bucket/prefix")
    return parts.netloc, parts.path.strip("/")
