"""The ``gcp`` provider: Compute Engine spot and on-demand GPU VMs (docs/gcp.md).

Registered as entry point ``gcp`` in group ``gpuorch.providers``; google-cloud-compute is
imported only when the provider is built, so the CLI and a daemon without GCP never pay for it.

Kept light (no imports): the agent bundle ships this file with the instance-side modules
(``store``, ``notice``), which must import on the instance's bare Python. ``GcpProvider`` is
imported on first use.
"""

from typing import Any

__all__ = ["GcpProvider"]


def __getattr__(name: str) -> Any:
    if name == "GcpProvider":
        from .provider import GcpProvider

        return GcpProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
