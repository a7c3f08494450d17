"""The ``azure`` provider: Azure spot and on-demand GPU VMs through azure-mgmt-compute (docs/azure.md).

Registered as entry point ``azure`` in group ``gpuorch.providers``; the Azure SDKs are imported
only when the provider is built.
"""

from .provider import AzureProvider

__all__ = ["AzureProvider"]
