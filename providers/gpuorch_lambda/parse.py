"""Lambda's answers read as gpuorch values: instances (name token -> tags), instance types -> offers.

Lambda instances carry no tags, so the launch's client token is the instance's ``name``
(``gpuorch-<owner>-<job>-<attempt>``, at most 64 characters, Lambda's limit for a name): the
managed tags are read back from it, and an instance whose name is not such a token is not
gpuorch's. Instance shape (https://docs-api.lambda.ai/api/cloud, "Instance"): ``id``, ``name``,
``ip``, ``status`` (booting, active, unhealthy, terminating, terminated), ``region.name``,
``instance_type.name``; no creation time, so ``created_at`` and ``ended_at`` stay None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch.provider import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_OWNER, Instance, InstanceState, Offer, gpus
from gpuorch.provider.port import TAG_NODE

from .catalog import BILLING, CATALOG, PROVIDER, gpus_of

_TOKEN = re.compile(r"gpuorch-(?:(?P<owner>[a-z0-9]{1,16})-)?(?P<job>\d{1,18})-(?P<attempt>\d{1,9})"
                    r"(?:-n(?P<node>\d+))?")
_STATES = {
    "booting": InstanceState.PENDING,
    "active": InstanceState.RUNNING,
    "unhealthy": InstanceState.RUNNING,  # up, failing Lambda's health checks: the runner decides
    # Billing "ends the moment you terminate the instance" (docs.lambda.ai/public-cloud/billing):
    # terminating is over for the daemon, as terminated is.
    "terminating": InstanceState.TERMINATED,
    "terminated": InstanceState.TERMINATED,
}


def tags_of(name: str | None) -> dict[str, str] | None:
    """The managed tags a client-token name carries; None for a name that is not one."""
    m = _TOKEN.fullmatch(name or "")
    if m is None:
        return None
    tags = {TAG_MANAGED: "true", TAG_JOB: str(int(m["job"])), TAG_ATTEMPT: str(int(m["attempt"]))}
    if m["owner"]:
        tags[TAG_OWNER] = m["owner"]
    if m["node"]:
        tags[TAG_NODE] = m["node"]
    return tags


def to_instance(d: Mapping[str, Any]) -> Instance:
    status = str(d.get("status") or "")
    region = str((d.get("region") or {}).get("name") or "")
    itype = str((d.get("instance_type") or {}).get("name") or "")
    state = _STATES.get(status, InstanceState.PENDING)
    return Instance(
        id=str(d["id"]), provider=PROVIDER, region=region, zone=region, instance_type=itype, spot=False,
        state=state, tags=tags_of(d.get("name")) or {}, host=d.get("ip") or None, port=22 if d.get("ip") else None,
        state_reason=status if status not in ("active", "booting") else None,
    )


def is_managed(d: Mapping[str, Any]) -> bool:
    return tags_of(d.get("name")) is not None


def offers_from_types(types: Mapping[str, Any], regions: Iterable[str] | None = None) -> list[Offer]:
    """An on-demand offer per (region with capacity now, instance type gpuorch knows the GPU of)
    from ``GET /instance-types``; ``regions``: only these (None: all). Prices are cents per hour."""
    wanted = set(regions) if regions else None
    out: list[Offer] = []
    for name, entry in sorted(types.items()):
        t = entry.get("instance_type") or {}
        known = gpus_of(str(t.get("name") or name))
        cents = t.get("price_cents_per_hour")
        if known is None or not isinstance(cents, int | float) or not 0 < cents < 10**7:
            continue
        gpu, count = known
        specs = t.get("specs") or {}
        spec = gpus.variant_for(gpu, _memory(t)) or gpus.lookup(gpu)
        for region in entry.get("regions_with_capacity_available") or ():
            rname = str(region.get("name") or "")
            if not rname or (wanted is not None and rname not in wanted):
                continue
            out.append(Offer(
                provider=PROVIDER, region=rname, zone=rname, instance_type=str(t.get("name") or name),
                gpu=spec.name if spec else gpu, gpu_count=int(specs.get("gpus") or count),
                gpu_memory_gib=float(_memory(t) or (spec.usable if spec else 0)),
                vcpus=float(specs.get("vcpus") or 0), memory_gib=float(specs.get("memory_gib") or 0),
                price_per_hour=round(cents / 100, 4), spot_price_per_hour=None,
                billing_granularity_s=BILLING.increment_s, min_billing_s=BILLING.minimum_s,
                interconnect=CATALOG.interconnect_for(str(t.get("name") or name), count),
            ))
    return out


def _memory(t: Mapping[str, Any]) -> float | None:
    """GPU memory per GPU from the description, ``1x A100 (40 GB SXM4)`` -> 40."""
    m = re.search(r"\((\d+(?:\.\d+)?)\s*GB", str(t.get("gpu_description") or t.get("description") or ""))
    return float(m.group(1)) if m else None
