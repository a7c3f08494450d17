"""The ``azure`` provider: Azure spot and on-demand GPU VMs through azure-mgmt-compute (docs/azure.md).

Registered as entry point ``azure`` in group ``gpuorch.providers``; the Azure SDKs are imported
only when the provider is built.

Kept light (no imports): the agent bundle ships this file with the instance-side modules
(``store``, ``notice``), which must import on the instance's bare Python. ``AzureProvider`` is
imported on first use.
"""

from typing import Any

__all__ = ["AzureProvider"]


def __getattr__(name: str) -> Any:
    if name == "AzureProvider":
        from .provider import AzureProvider

        return AzureProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
