"""The object-store port: a flat blob store addressed by string keys, and ``open_store``.

Stdlib only: this package is shipped to cloud instances as-is (Python 3.8+). Stores are found by
URL scheme in the ``gpuorch.stores`` registry (``gpuorch.checkpoint.registry``): the file://
store lives here, the cloud ones in their adapters (``gpuorch_aws.store``...), which import
their SDK only when a store is built, so the agent never imports an SDK it does not need.
"""

from __future__ import annotations

import builtins
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Optional, Union

from gpuorch.checkpoint.registry import STORE_PLUGINS
from gpuorch.checkpoint.url import StoreUrl, store_url


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

    #: The provider whose cloud holds this store's data (placement charges egress from the
    #: others), or None for a store of no cloud (file://).
    provider: ClassVar[Optional[str]] = None
    #: The gpuorch pip extra that installs the store's SDK ("" for none): named in the one-line
    #: error when the SDK is missing, so a store's module must import without its SDK.
    extra: ClassVar[str] = ""

    @classmethod
    @abstractmethod
    def from_url(cls, url: StoreUrl) -> tuple[ObjectStore, str]:
        """Open the store a URL names; return it and the key prefix the URL points at.

        ValueError naming the accepted form for a URL of this scheme that it cannot read;
        ModuleNotFoundError when the store's SDK is missing (``open_store`` names ``extra``).
        """

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


def schemes() -> builtins.list[str]:
    """The URL schemes with a store in this installation (registered and its module present)."""
    return [s for s in STORE_PLUGINS.names() if STORE_PLUGINS.findable(s)]


def not_implemented(scheme: str) -> str | None:
    """Why a registered scheme's store cannot be used by this gpuorch (its module is not part of
    it), or None. Cheap: looks the module up without importing it or its SDK."""
    if scheme not in STORE_PLUGINS.table or STORE_PLUGINS.findable(scheme):
        return None
    usable = ", ".join(f"{s}://" for s in schemes())
    return f"{scheme}:// checkpoint stores are not implemented in this gpuorch yet; use {usable}"


def unsupported(scheme: str, url: str) -> str | None:
    """The one-line refusal of ``url`` when no installed store serves its ``scheme``, or None."""
    if scheme in STORE_PLUGINS.table:
        return not_implemented(scheme)
    known = ", ".join(f"{s}://" for s in schemes())
    return f"unsupported checkpoint store {url!r}; use one of {known}"


def store_class(scheme: str) -> type[ObjectStore]:
    """The ``ObjectStore`` class registered for ``scheme`` (imported; its SDK is not).
    Raises ``UnsupportedStore`` (one line) for an unknown or unshipped scheme."""
    why = unsupported(scheme, f"{scheme}://")
    if why:
        raise UnsupportedStore(why)
    try:
        cls: type[ObjectStore] = STORE_PLUGINS.load(scheme)
    except ModuleNotFoundError as e:  # a third-party store whose module imports a missing package
        raise UnsupportedStore(f"{scheme}:// checkpoint stores cannot load: {e}") from None
    return cls


def store_provider(scheme: str) -> str | None:
    """The provider whose cloud a scheme's store lives in (placement's egress reasoning), or
    None (file://, or a scheme this installation has no store for)."""
    try:
        return store_class(scheme).provider
    except UnsupportedStore:
        return None


def open_store(url: Union[str, StoreUrl]) -> tuple[ObjectStore, str]:
    """Open the store for ``url`` (``file:///abs/path``, ``s3://bucket/prefix``, ...).

    Returns ``(store, prefix)``: keys for this URL live under ``prefix`` (``join_key``).
    Raises ``UnsupportedStore`` with a one-line fix for unknown schemes or a missing extra, and
    ValueError naming the form for a URL its store cannot read.
    """
    try:
        parsed = store_url(url)
    except ValueError:  # no scheme at all
        raise UnsupportedStore(unsupported("", str(url))) from None
    why = unsupported(parsed.scheme, parsed.raw)
    if why:
        raise UnsupportedStore(why)
    cls = store_class(parsed.scheme)
    try:
        return cls.from_url(parsed)
    except ModuleNotFoundError:  # the store's SDK is not installed
        if not cls.extra:
            raise
        raise UnsupportedStore(
            f"{parsed.scheme}:// checkpoint stores need the {cls.extra} extra: pip install gpuorch[{cls.extra}]"
        ) from None


def env_int(name: str, default: int) -> int:
    """A whole-number knob from the environment (the agent reads the stores' knobs there)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None


def bucket_and_prefix(url: Union[str, StoreUrl], scheme: str) -> tuple[str, str]:
    """``scheme://bucket/prefix`` -> (bucket, prefix); ValueError naming the form otherwise."""
    form = f"{scheme}://bucket/prefix"
    try:
        parsed = store_url(url)
    except ValueError:
        raise ValueError(f"cannot read store URL {str(url)!r}; write {form}") from None
    if parsed.scheme != scheme:
        raise ValueError(f"cannot read store URL {parsed.raw!r}; write {form}")
    return parsed.bucket_only(form), parsed.prefix
