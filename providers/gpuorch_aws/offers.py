"""AWS offers: what EC2 says it sells in a region, priced.

EC2 gives the hardware (``DescribeInstanceTypes``: GpuInfo, vCPUs, memory), where it is sold
(``DescribeInstanceTypeOfferings`` per availability zone) and spot prices
(``DescribeSpotPriceHistory``); it has no on-demand prices (that is the Pricing API, which
needs another permission and is slow), so those come from a price source: by default the
shipped catalog snapshot. Only instance types the price source prices are asked about, which
also keeps ``DescribeInstanceTypes`` to one small call per region.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from gpuorch.provider import Offer, gpus
from gpuorch.provider.catalog import load_rows

from .calls import Ec2
from .catalog import CATALOG
from .parse import PROVIDER, utc

# region -> {instance type: on-demand USD per hour}
PriceSource = Callable[[str], Mapping[str, float]]
# (region, instance type) -> spot interruption bucket ("<5%" ... ">20%") where known
BucketSource = Callable[[str, str], str | None]
SPOT_PRODUCTS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]
_MATCH = 0.10  # reported GPU memory within 10% of a model's usable memory is that model


class CatalogPrices:
    """On-demand prices and interruption buckets from a catalog CSV (default: AWS's shipped rows)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = path
        self._by_region: dict[str, dict[str, tuple[float, str | None]]] | None = None

    def _table(self) -> dict[str, dict[str, tuple[float, str | None]]]:
        if self._by_region is None:
            table: dict[str, dict[str, tuple[float, str | None]]] = {}
            for r in load_rows(self.path if self.path is not None else CATALOG.rows):
                if r.provider == PROVIDER:  # on-demand is one price per region; keep the highest seen
                    old = table.setdefault(r.region, {}).get(r.instance_type)
                    if old is None or r.price_per_hour > old[0]:
                        table[r.region][r.instance_type] = (r.price_per_hour, r.interruption_bucket or (old and old[1]))
            self._by_region = table
        return self._by_region

    def __call__(self, region: str) -> dict[str, float]:
        return {t: price for t, (price, _) in self._table().get(region, {}).items()}

    def bucket(self, region: str, instance_type: str) -> str | None:
        return self._table().get(region, {}).get(instance_type, (0.0, None))[1]


def canonical_gpu(name: str, memory_mib: float) -> str | None:
    """gpuorch's name for an EC2 GPU: the model of that family whose usable memory matches.

    ``("A100", 81920)`` -> ``A100-80GB``; ``("L4", 2861)`` (a fraction of a card) -> None, and so
    is a GPU gpuorch does not know (it cannot be sized or placed).
    """
    spec = gpus.lookup(name)
    if spec is None or memory_mib <= 0:
        return None
    gib = memory_mib / 1024
    family = gpus.family(spec.name)
    candidates = [g for g in gpus.GPUS if gpus.family(g.name) == family and abs(gib - g.usable) <= _MATCH * g.usable]
    if not candidates:
        return None
    # The named model wins a tie (H100 vs H100-PCIE: both 80 GB; EC2 calls the SXM one "H100").
    return min(candidates, key=lambda g: (abs(gib - g.usable), g.name != spec.name)).name


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(zone, instance type) -> the most recent spot price in ``history``."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for h in history:
        key = (h["AvailabilityZone"], h["InstanceType"])
        ts = utc(h["Timestamp"])
        assert ts is not None
        if key not in latest or ts > latest[key][0]:
            latest[key] = (ts, float(h["SpotPrice"]))
    return {k: price for k, (_, price) in latest.items()}


def build_offers(
    region: str, types: Iterable[Mapping[str, Any]], offerings: Iterable[Mapping[str, Any]],
    spot_history: Iterable[Mapping[str, Any]], prices: Mapping[str, float],
    bucket: BucketSource | None = None, zones: set[str] | None = None,
) -> list[Offer]:
    """One offer per (zone, instance type) EC2 sells in ``region``, that has a GPU gpuorch knows
    and an on-demand price; spot where the type supports it and the zone has a spot price.
    ``zones`` limits offers to zones the configuration can launch into (configured subnets)."""
    rule = CATALOG.billing
    spot = latest_spot_prices(spot_history)
    by_type = {t["InstanceType"]: t for t in types}
    out: list[Offer] = []
    for o in offerings:
        zone, name = o["Location"], o["InstanceType"]
        t, price = by_type.get(name), prices.get(name)
        if t is None or not price or price <= 0 or (zones is not None and zone not in zones):
            continue
        usage = set(t.get("SupportedUsageClasses") or ("on-demand", "spot"))
        gpu_list = (t.get("GpuInfo") or {}).get("Gpus") or []
        if "on-demand" not in usage or not gpu_list:
            continue
        g = gpu_list[0]
        mib = float((g.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
        gpu = canonical_gpu(g.get("Name", ""), mib)
        if gpu is None:
            continue
        count = sum(int(x.get("Count", 0)) for x in gpu_list)
        spot_price = spot.get((zone, name)) if "spot" in usage else None
        out.append(Offer(
            provider=PROVIDER, region=region, zone=zone, instance_type=name, gpu=gpu, gpu_count=count,
            gpu_memory_gib=mib / 1024, vcpus=float(t["VCpuInfo"]["DefaultVCpus"]),
            memory_gib=float(t["MemoryInfo"]["SizeInMiB"]) / 1024, price_per_hour=float(price),
            spot_price_per_hour=spot_price if spot_price and spot_price > 0 else None,
            billing_granularity_s=rule.increment_s, min_billing_s=rule.minimum_s,
            interconnect=CATALOG.interconnect_for(name, count),
            interruption_bucket=bucket(region, name) if bucket else None,
        ))  # fmt: skip
    return sorted(out, key=lambda x: (x.zone, x.instance_type))


def fetch_offers(ec2: Ec2, region: str, prices: PriceSource, bucket: BucketSource | None,
                 zones: set[str] | None, now: datetime) -> list[Offer]:
    """Three listing calls per region (a fourth for spot), each retried; see ``build_offers``."""
    priced = sorted(prices(region))
    if not priced:
        return []
    types: list[dict[str, Any]] = []
    for i in range(0, len(priced), 100):  # the API takes at most 100 names a call
        chunk = priced[i:i + 100]
        # Filter rather than InstanceTypes=: an unknown name in a filter is ignored, not an error.
        types += ec2.pages(region, "describe_instance_types", "InstanceTypes",
                           Filters=[{"Name": "instance-type", "Values": chunk}])
    names = [t["InstanceType"] for t in types if (t.get("GpuInfo") or {}).get("Gpus")]
    if not names:
        return []
    offerings = ec2.pages(region, "describe_instance_type_offerings", "InstanceTypeOfferings",
                          LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": names}])
    spot_names = [t["InstanceType"] for t in types if "spot" in (t.get("SupportedUsageClasses") or ())]
    history = ec2.pages(region, "describe_spot_price_history", "SpotPriceHistory", InstanceTypes=spot_names,
                        ProductDescriptions=SPOT_PRODUCTS, StartTime=now) if spot_names else []
    return build_offers(region, types, offerings, history, prices(region), bucket, zones)
