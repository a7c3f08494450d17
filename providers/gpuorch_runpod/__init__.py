"""The ``runpod`` provider: RunPod GPU pods, on-demand and interruptible (docs/runpod.md).

Registered as entry point ``runpod`` in group ``gpuorch.providers``. Kept light (no imports):
the stdlib-only ``catalog`` module (entry point ``gpuorch.catalogs``) is imported through this
package and must not pull in the provider, pydantic or an HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import RunpodProvider as RunpodProvider

__all__ = ["RunpodProvider"]


def __getattr__(name: str) -> Any:
    if name == "RunpodProvider":
        from .provider import RunpodProvider

        return RunpodProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
