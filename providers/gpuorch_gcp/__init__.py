"""The ``gcp`` provider: Compute Engine spot and on-demand GPU VMs (docs/gcp.md).

Registered as entry point ``gcp`` in group ``gpuorch.providers``; google-cloud-compute is
imported only when the provider is built, so the CLI and a daemon without GCP never pay for it.
"""

from .provider import GcpProvider

__all__ = ["GcpProvider"]
