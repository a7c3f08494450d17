"""The ``gcp`` provider: Compute Engine spot and on-demand GPU VMs (docs/gcp.md).

Registered as entry point ``gcp`` in group ``gpuorch.providers``; google-cloud-compute is
imported only when the provider is built, so the CLI and a daemon without GCP never pay for it.

Kept light (no imports): the agent bundle ships this file with the instance-side modules
(``store``, ``notice``), which must import on the instance's bare Python. ``GcpProvider`` is
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import GcpProvider as GcpProvider

__all__ = ["GcpProvider"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported
    # through this package, and must not pull in the provider, pydantic or the SDK.
    if name == "GcpProvider":
        from .provider import GcpProvider

        return GcpProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
