"""The ``lambda`` provider: Lambda Cloud's on-demand GPU instances over its public REST API
(https://cloud.lambdalabs.com/api/v1, docs/lambda.md).

Registered as entry point ``lambda`` in group ``gpuorch.providers``; ``httpx`` is imported only
when the provider is built. Kept light: the stdlib-only ``catalog`` module (entry point
``gpuorch.catalogs``) is imported through this package and must not pull in the provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .provider import LambdaProvider as LambdaProvider

__all__ = ["LambdaProvider"]


def __getattr__(name: str) -> Any:
    if name == "LambdaProvider":
        from .provider import LambdaProvider

        return LambdaProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
