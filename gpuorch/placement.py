"""Placement: which offer a job runs on. Pure functions, no I/O.

Ranks every (offer, spot?) pair that satisfies the job's spec by its hourly price, cheapest
first. Offers the caller wants to avoid (a zone that just preempted us, a backed-off
instance type) are filtered out by the ``avoid`` predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import gpus
from .provider import Offer
from .spec import JobSpec, SpotPolicy


@dataclass(frozen=True)
class Candidate:
    offer: Offer
    spot: bool

    @property
    def price_per_hour(self) -> float:
        return self.offer.price(self.spot)


def fits(spec: JobSpec, offer: Offer) -> bool:
    res = spec.resources
    if spec.providers and offer.provider not in spec.providers:
        return False
    if spec.regions and offer.region not in spec.regions:
        return False
    if offer.vcpus and offer.vcpus < res.cpus:
        return False
    if offer.memory_gib and offer.memory_gib < res.memory:
        return False
    req = res.gpu
    if req is None:
        return True
    if offer.gpu is None or offer.gpu_count < req.count:
        return False
    if req.name and gpus.lookup(offer.gpu) != gpus.lookup(req.name):
        return False
    return gpus.memory_matches(offer.gpu_memory_gib, req.memory_floor_gib())


def candidates(spec: JobSpec, offers: Iterable[Offer], avoid: Callable[[Candidate], bool] | None = None) -> list[Candidate]:
    out: list[Candidate] = []
    for offer in offers:
        if not fits(spec, offer):
            continue
        for spot in _markets(spec.spot_policy, offer):
            c = Candidate(offer, spot)
            if spec.max_price_per_hour is not None and c.price_per_hour > spec.max_price_per_hour:
                continue
            if avoid is not None and avoid(c):
                continue
            out.append(c)
    out.sort(key=lambda c: (c.price_per_hour, c.offer.provider, c.offer.zone, c.offer.instance_type, c.spot))
    return out


def _markets(policy: SpotPolicy, offer: Offer) -> tuple[bool, ...]:
    has_spot = offer.spot_price_per_hour is not None
    if policy == SpotPolicy.SPOT:
        return (True,) if has_spot else ()
    if policy == SpotPolicy.ON_DEMAND:
        return (False,)
    return (True, False) if has_spot else (False,)
