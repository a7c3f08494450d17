"""Offers from RunPod's ``gpuTypes`` (prices per GPU-hour in each cloud, on-demand and spot), pure.

Fields as documented (https://docs.runpod.io/sdks/graphql/manage-pods, "List GPU types"):
``securePrice``/``communityPrice`` (on-demand), ``secureSpotPrice``/``communitySpotPrice``
(interruptible: the lowest bid that wins now), ``secureCloud``/``communityCloud`` (sold there),
``maxGpuCount``; ``lowestPrice.minVcpu``/``minMemory`` per GPU. A price of 0 or none: not sold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch.provider import Offer, gpus

from .catalog import CATALOG, COUNTS, GPU_TYPES, PROVIDER, instance_type


def _price(v: Any) -> float | None:
    try:
        p = float(v)
    except (TypeError, ValueError):
        return None
    return p if math.isfinite(p) and 0 < p < 10_000 else None


def offers_from(gpu_types: Iterable[Mapping[str, Any]], clouds: Iterable[str]) -> list[Offer]:
    rule = CATALOG.billing
    out: list[Offer] = []
    for t in gpu_types:
        name = GPU_TYPES.get(str(t.get("id")))
        spec = gpus.lookup(name) if name else None
        if spec is None:
            continue
        lowest = t.get("lowestPrice") or {}
        vcpu = float(lowest.get("minVcpu") or 0)
        ram = float(lowest.get("minMemory") or 0)
        most = int(t.get("maxGpuCount") or 1)
        for cloud in clouds:
            if not t.get(f"{cloud}Cloud"):
                continue
            price = _price(t.get(f"{cloud}Price"))
            if price is None:
                continue
            spot = _price(t.get(f"{cloud}SpotPrice"))
            if spot is not None and spot >= price:
                spot = None  # an interruptible pod never costs more than an on-demand one
            for n in (c for c in COUNTS if c <= most):
                out.append(Offer(
                    provider=PROVIDER, region=cloud, zone=cloud, instance_type=instance_type(spec.name, n),
                    gpu=spec.name, gpu_count=n, gpu_memory_gib=spec.usable, vcpus=vcpu * n, memory_gib=ram * n,
                    price_per_hour=round(price * n, 4), spot_price_per_hour=round(spot * n, 4) if spot else None,
                    billing_granularity_s=rule.increment_s, min_billing_s=rule.minimum_s,
                    interconnect=CATALOG.interconnect_for(instance_type(spec.name, n), n)))
    return out
