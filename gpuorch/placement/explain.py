"""Why offers were rejected: one reason per offer class without a candidate (``gpuorch plan``).

The class-level reason comes from ``requirements`` (GPU, count, memory, CPU, RAM, precision);
otherwise the first per-offer filter that emptied the class, in this order: provider, region,
the job volume's zone, spot availability, the price cap, and finally the caller's ``avoid``.
Only run for explanations: a plain Python pass over the rejected classes' offers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..spec import JobSpec
from .cost import markets
from .index import OfferIndex
from .requirements import Refusal


@dataclass(frozen=True)
class Rejection:
    provider: str
    instance_type: str
    gpu: str | None
    gpu_count: int
    offers: int
    reason: str
    filtered: bool = False  # by the job's own restrictions (provider, region, volume zone, market, price, avoid)


@dataclass(frozen=True)
class Shortfall:
    """The largest configuration refused for memory: what the job needs there, what it has."""

    label: str
    gpu: str | None
    gpu_count: int
    need_gib: float
    usable_gib: float


def _row_filters(spec: JobSpec, idx: OfferIndex, volume_zone: str | None) -> list[tuple[str, Callable[[int], bool]]]:
    filters: list[tuple[str, Callable[[int], bool]]] = []
    if spec.providers:
        names = set(spec.providers)
        filters.append((f"provider not in providers ({', '.join(spec.providers)})", lambda r: idx.offers[r].provider in names))
    if spec.regions:
        codes = {idx.regions[r] for r in spec.regions if r in idx.regions}
        filters.append((f"region not in regions ({', '.join(spec.regions)})", lambda r: idx.region[r] in codes))
    if volume_zone:
        zone = idx.zones.get(volume_zone, -1)
        filters.append((f"not in {volume_zone}, the zone of the job's volume", lambda r: idx.zone[r] == zone))
    return filters


def rejections(spec: JobSpec, idx: OfferIndex, volume_zone: str | None, refused: dict[int, Refusal],
               placed: set[int], cap: float) -> list[Rejection]:  # fmt: skip
    """A reason for every class not in ``placed`` (classes that have a candidate)."""
    filters = _row_filters(spec, idx, volume_zone)
    market = markets(spec.spot_policy)
    out = []
    for ci, c in enumerate(idx.classes):
        if ci in placed:
            continue
        reason = refused[ci].reason if ci in refused else None
        filtered = reason is None
        alive = list(range(c.start, c.stop))
        for why, keep in filters if reason is None else ():
            alive = [r for r in alive if keep(r)]
            if not alive:
                reason = why
                break
        if reason is None:
            prices = [p for r in alive for spot in market if (p := (idx.spot_price if spot else idx.price)[r]) is not None]
            if not prices:
                reason = "no spot offering (spot_policy: spot)"
            elif min(prices) > cap:
                reason = f"above max_price_per_hour ${cap:g}/h (cheapest ${min(prices):.2f}/h)"
            else:
                reason = "avoided (recent preemption, capacity or quota trouble)"
        out.append(Rejection(c.provider, c.instance_type, c.gpu, c.gpu_count, c.stop - c.start, reason, filtered))
    return out


def shortfall(idx: OfferIndex, refused: dict[int, Refusal]) -> Shortfall | None:
    short = [(idx.classes[ci], r) for ci, r in refused.items() if r.need_gib is not None]
    if not short:
        return None
    c, r = max(short, key=lambda cr: (cr[0].gpu_count * (cr[1].usable_gib or 0), -(cr[1].need_gib or 0)))
    return Shortfall(c.label, c.gpu, c.gpu_count, r.need_gib or 0.0, r.usable_gib or 0.0)
