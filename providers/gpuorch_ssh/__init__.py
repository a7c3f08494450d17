"""The ``ssh`` provider: GPU servers the user owns, reached over SSH, as a node pool
(docs/ssh-pools.md). Registered as entry point ``ssh`` in group ``gpuorch.providers``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import SshPoolProvider as SshPoolProvider

__all__ = ["SshPoolProvider"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported through
    # this package, and must not pull in paramiko or pydantic.
    if name == "SshPoolProvider":
        from .provider import SshPoolProvider

        return SshPoolProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
