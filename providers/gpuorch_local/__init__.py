"""The ``local`` provider: instances are isolated work directories and process groups on this host.

Registered as entry point ``local`` in group ``gpuorch.providers``. See docs/providers.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuorch.provider.localdir import LocalRunner as LocalRunner
    from gpuorch.provider.localdir import instance_id_for as instance_id_for

    from .provider import LocalProvider as LocalProvider

__all__ = ["LocalProvider", "LocalRunner", "instance_id_for"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported
    # through this package, and must not pull in the provider or pydantic.
    if name == "LocalProvider":
        from .provider import LocalProvider

        return LocalProvider
    if name in ("LocalRunner", "instance_id_for"):
        from gpuorch.provider import localdir

        return getattr(localdir, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
