"""The ``azure`` provider: Azure spot and on-demand GPU VMs through azure-mgmt-compute (docs/azure.md).

Registered as entry point ``azure`` in group ``gpuorch.providers``; the Azure SDKs are imported
only when the provider is built.

Kept light (no imports): the agent bundle ships this file with the instance-side modules
(``store``, ``notice``), which must import on the instance's bare Python. ``AzureProvider`` is
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import AzureProvider as AzureProvider

__all__ = ["AzureProvider"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported
    # through this package, and must not pull in the provider, pydantic or the SDK.
    if name == "AzureProvider":
        from .provider import AzureProvider

        return AzureProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
