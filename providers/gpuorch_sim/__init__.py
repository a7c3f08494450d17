"""The ``sim`` provider: a simulated multi-region spot market replaying real traces, whose
instances run the real agent and job as local processes. See docs/recovery.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import SimProvider as SimProvider

__all__ = ["SimProvider"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported
    # through this package, and must not pull in the provider, pydantic or the SDK.
    if name == "SimProvider":
        from .provider import SimProvider

        return SimProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
