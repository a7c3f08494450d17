"""Vast's marketplace as gpuorch offers: asks grouped into classes, ranked by expected price.

An ask is one host's listing (``POST /api/v0/bundles/``, docs.vast.ai/api-reference/search/search-offers:
``gpu_name``, ``num_gpus``, ``gpu_ram`` MB, ``cpu_cores_effective``, ``cpu_ram`` MB, ``disk_space``,
``dph_total`` $/h with the storage asked for, ``min_bid``, ``reliability2``, ``geolocation``,
``verified``, ``storage_cost`` $/GB-month: the field list of vastai 1.9.1's ``search offers``,
vastai/cli/commands/offers.py, and its ``Offer`` model, vastai/data/offer.py). Asks come and go
by the minute, so gpuorch never offers a host: an offer is a class, GPU model x count in one
country (``RTX4090x1`` in ``US``), and a launch takes the best live ask of the class at that moment
(``pick``), or answers NoCapacityError.

The ranking rule: a host's **expected price** is its price divided by its reliability score
(0..1, Vast's estimate of the share of time the host stays up). An unreliable host's hour costs
more in expectation (a failure loses the work since the last checkpoint and a relaunch), and
dividing by the score charges that in the offer the placement and the caps use. Hosts below
``min_reliability`` are never offered. A class's price is its best ask's expected price; its
vCPUs and RAM the least of its acceptable asks (any of them may be the one rented); its storage
rate (``Offer.storage_usd_per_gib_month``, what a job's volume costs) that best ask's own
``storage_cost``, the host a launch most likely takes (none given: the catalog's single rate).
"""

from __future__ import annotations

import math
from typing import Any

from gpuorch.provider import Offer, gpus

from .catalog import CATALOG
from .config import VastOptions
from .names import SPELLING, canonical, instance_type, vast_names
from .parse import PROVIDER, country

GLOBAL = "global"  # a region of the shipped snapshot: any country


def query(o: VastOptions, *, gpu: str | None = None, count: int | None = None, region: str | None = None) -> dict:
    """Vast's search filter for the acceptable asks (of one class, when named)."""
    q: dict[str, Any] = {"rentable": {"eq": True}, "rented": {"eq": False}, "external": {"eq": False},
                         "reliability2": {"gte": o.min_reliability}}
    if o.verified_only:
        q["verified"] = {"eq": True}
    q["gpu_name"] = {"in": vast_names(gpu) if gpu else sorted(SPELLING.values())}
    if count is not None:
        q["num_gpus"] = {"eq": count}
    countries = [region] if region and region != GLOBAL else list(o.regions)
    if countries:
        q["geolocation"] = {"in": countries}
    return q


def reliability(ask: dict[str, Any]) -> float:
    r = ask.get("reliability2", ask.get("reliability"))
    return float(r) if isinstance(r, int | float) and 0 < r <= 1 else 0.0


def expected(price: float, ask: dict[str, Any]) -> float:
    """The ranking rule (module docstring): price / reliability."""
    r = reliability(ask)
    return price / r if r > 0 else math.inf


def _number(ask: dict[str, Any], key: str) -> float:
    v = ask.get(key)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) and v >= 0 else 0.0


def classify(ask: dict[str, Any], o: VastOptions) -> tuple[str, int, str] | None:
    """(gpu, count, country) of an acceptable ask; None for one gpuorch must not rent."""
    count = ask.get("num_gpus")
    if not isinstance(count, int) or not 1 <= count <= 16:
        return None
    name = canonical(str(ask.get("gpu_name") or ""), _number(ask, "gpu_ram"))
    where = country(ask.get("geolocation"))
    if name is None or gpus.lookup(name) is None or where is None or (o.regions and where not in o.regions):
        return None
    if reliability(ask) < o.min_reliability or (o.verified_only and ask.get("verified") is False):
        return None
    if _number(ask, "dph_total") <= 0 or ask.get("rentable") is False or ask.get("rented") is True:
        return None
    if _number(ask, "cpu_cores_effective") < o.min_cpu_per_gpu * count or \
            _number(ask, "cpu_ram") / 1024 < o.min_ram_gib_per_gpu * count:
        return None
    return name, count, where


def storage_rate(ask: dict[str, Any]) -> float | None:
    """The host's own storage price, USD per GB-month (``storage_cost``); None where it gives none."""
    v = ask.get("storage_cost")
    return round(float(v), 6) if isinstance(v, int | float) and not isinstance(v, bool) and \
        math.isfinite(v) and 0 <= v < 100 else None


def bid_of(ask: dict[str, Any], o: VastOptions) -> float | None:
    """The bid gpuorch places on an interruptible ask: its minimum bid times ``bid_factor``."""
    floor = _number(ask, "min_bid")
    return round(floor * o.bid_factor, 6) if floor > 0 else None


def offers_of(asks: list[dict[str, Any]], o: VastOptions) -> list[Offer]:
    best: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for ask in asks:
        key = classify(ask, o)
        if key is not None:
            best.setdefault(key, []).append(ask)
    out = []
    for (gpu, count, where), members in sorted(best.items()):
        spec = gpus.lookup(gpu)
        assert spec is not None
        top = min(members, key=lambda a: (expected(_number(a, "dph_total"), a), int(a.get("id") or 0)))
        od = expected(_number(top, "dph_total"), top)
        bids = [expected(b, a) for a in members if (b := bid_of(a, o)) is not None]
        spot = min(bids) if bids and min(bids) < od else None
        out.append(Offer(
            provider=PROVIDER, region=where, zone=where, instance_type=instance_type(gpu, count), gpu=gpu,
            gpu_count=count, gpu_memory_gib=spec.usable, vcpus=min(_number(a, "cpu_cores_effective") for a in members),
            memory_gib=round(min(_number(a, "cpu_ram") for a in members) / 1024, 2), price_per_hour=round(od, 4),
            spot_price_per_hour=None if spot is None else round(spot, 4), billing_granularity_s=1, min_billing_s=0,
            interconnect=CATALOG.interconnect_for(instance_type(gpu, count), count),
            storage_usd_per_gib_month=storage_rate(top),
        ))  # fmt: skip
    return out


def pick(asks: list[dict[str, Any]], offer: Offer, spot: bool, o: VastOptions) -> tuple[dict[str, Any], float] | None:
    """The live ask a launch of ``offer`` takes now, with the price it pays (the bid when ``spot``),
    or None when none is within ``price_tolerance`` of what the offer said."""
    limit = offer.price(spot) * (1 + o.price_tolerance)
    ranked = []
    for ask in asks:
        key = classify(ask, o)
        if key is None or key[:2] != (offer.gpu, offer.gpu_count) or \
                (offer.region != GLOBAL and key[2] != offer.region):
            continue
        pay = bid_of(ask, o) if spot else _number(ask, "dph_total")
        if pay is None:
            continue
        if (cost := expected(pay, ask)) <= limit + 1e-9:
            ranked.append((cost, -reliability(ask), int(ask.get("id") or 0), ask, pay))
    if not ranked:
        return None
    _, _, _, ask, pay = min(ranked, key=lambda t: t[:3])
    return ask, pay
