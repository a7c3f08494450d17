"""The adapter kit: the provider port and the small set of core names an adapter may import.

An adapter (``providers/gpuorch_<cloud>/``) imports only from here (and these submodules),
``gpuorch.errors``, the instance-side base classes of ``gpuorch.agent`` and
``gpuorch.checkpoint.store``, its own SDK, and ``gpuorch.testing`` in its tests; never another
adapter. docs/providers.md walks through adding one.

Names are resolved on first use (PEP 562), so importing a light submodule such as
``gpuorch.provider.catalog`` (an adapter's stdlib-only catalog declaration) does not import
pydantic, tenacity or paramiko through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuorch import gpus as gpus
    from gpuorch.agent.protocol import NoticeSource as NoticeSource
    from gpuorch.clock import utcnow as utcnow
    from gpuorch.doctor.findings import Finding as Finding
    from gpuorch.provider.catalog import AdapterCatalog as AdapterCatalog
    from gpuorch.provider.catalog import BillingRule as BillingRule
    from gpuorch.provider.catalog import Family as Family
    from gpuorch.provider.catalog import OfferRow as OfferRow
    from gpuorch.provider.port import TAG_ATTEMPT as TAG_ATTEMPT
    from gpuorch.provider.port import TAG_JOB as TAG_JOB
    from gpuorch.provider.port import TAG_MANAGED as TAG_MANAGED
    from gpuorch.provider.port import TAG_OWNER as TAG_OWNER
    from gpuorch.provider.port import Instance as Instance
    from gpuorch.provider.port import InstanceState as InstanceState
    from gpuorch.provider.port import LaunchRequest as LaunchRequest
    from gpuorch.provider.port import Offer as Offer
    from gpuorch.provider.port import Provider as Provider
    from gpuorch.provider.port import ScheduledStop as ScheduledStop
    from gpuorch.provider.port import SupportsDoctor as SupportsDoctor
    from gpuorch.provider.port import SupportsPreemptionInjection as SupportsPreemptionInjection
    from gpuorch.provider.port import SupportsVolumes as SupportsVolumes
    from gpuorch.provider.port import Volume as Volume
    from gpuorch.provider.port import VolumeSpec as VolumeSpec
    from gpuorch.provider.port import client_token as client_token
    from gpuorch.provider.port import managed_tags as managed_tags
    from gpuorch.provider.retry import RetryPolicy as RetryPolicy
    from gpuorch.provider.retry import call_with_retries as call_with_retries
    from gpuorch.runners.cloudinit import launch_cloud_config as launch_cloud_config
    from gpuorch.runners.cloudinit import login_config as login_config
    from gpuorch.runners.cloudinit import user_data as user_data
    from gpuorch.runners.hostkeys import parse_public_key as parse_public_key
    from gpuorch.runners.pool import RunnerOptions as RunnerOptions
    from gpuorch.runners.pool import Runners as Runners
    from gpuorch.runners.port import Runner as Runner
    from gpuorch.runners.port import RunnerUnavailable as RunnerUnavailable

_PORT = ("TAG_ATTEMPT", "TAG_JOB", "TAG_MANAGED", "TAG_OWNER", "Instance", "InstanceState", "LaunchRequest", "Offer",
         "Provider", "ScheduledStop", "SupportsDoctor", "SupportsPreemptionInjection", "SupportsVolumes", "Volume",
         "VolumeSpec", "client_token", "managed_tags")
_WHERE: dict[str, str] = {
    **dict.fromkeys(_PORT, "gpuorch.provider.port"),
    "Offer": "gpuorch.provider.offer",  # the port's, from its own module: a catalog's offers need not import the port
    **dict.fromkeys(("AdapterCatalog", "BillingRule", "Family", "OfferRow"), "gpuorch.provider.catalog"),
    **dict.fromkeys(("RetryPolicy", "call_with_retries"), "gpuorch.provider.retry"),
    **dict.fromkeys(("launch_cloud_config", "login_config", "user_data"), "gpuorch.runners.cloudinit"),
    **dict.fromkeys(("RunnerOptions", "Runners"), "gpuorch.runners.pool"),
    **dict.fromkeys(("Runner", "RunnerUnavailable"), "gpuorch.runners.port"),
    "parse_public_key": "gpuorch.runners.hostkeys",
    "NoticeSource": "gpuorch.agent.protocol",
    "Finding": "gpuorch.doctor.findings",
    "utcnow": "gpuorch.clock",
}

__all__ = sorted([*_WHERE, "gpus"])


def __getattr__(name: str) -> Any:
    if name == "gpus":  # the GPU table and its lookups (``gpus.lookup``, ``gpus.family``)
        return importlib.import_module("gpuorch.gpus")
    if name not in _WHERE:
        raise AttributeError(f"module 'gpuorch.provider' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # resolved once
    return value
