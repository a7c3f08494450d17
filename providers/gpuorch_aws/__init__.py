"""The ``aws`` provider: EC2 spot and on-demand GPU instances and EBS volumes (docs/aws.md).

Registered as entry point ``aws`` in group ``gpuorch.providers``; boto3 is imported only when
the provider is built.

Kept light (no imports): the agent bundle ships this file with the instance-side modules
(``store``, ``notice``), which must import on the instance's bare Python. ``AwsProvider`` is
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import AwsProvider as AwsProvider

__all__ = ["AwsProvider"]


def __getattr__(name: str) -> Any:
    # Lazy: the stdlib-only ``catalog`` module (entry point gpuorch.catalogs) is imported
    # through this package, and must not pull in the provider, pydantic or the SDK.
    if name == "AwsProvider":
        from .provider import AwsProvider

        return AwsProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
