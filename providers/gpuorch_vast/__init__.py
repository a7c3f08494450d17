"""The ``vast`` provider: GPUs rented on Vast.ai's marketplace, on-demand and interruptible (docs/vast.md).

Registered as entry point ``vast`` in group ``gpuorch.providers``; the ``vastai`` client is
imported only when the provider is built. Kept light (no imports): the stdlib-only ``catalog``
module is imported through this package by ``gpuorch offers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import VastProvider as VastProvider

__all__ = ["VastProvider"]


def __getattr__(name: str) -> Any:
    if name == "VastProvider":
        from .provider import VastProvider

        return VastProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
