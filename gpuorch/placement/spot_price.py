"""The spot price placement ranks an offer at: the listed one, unless it is an outlier.

A spot price in one zone far below the same instance type's spot prices in the region's other
zones is more often a stale or thin market than a bargain (issue 19: p4d.24xlarge at $2.47/h in
use1-az1 against $7.88 and $8.12 in its sibling zones, 7.5% of on-demand). Placement ranks such
a zone at the median of its siblings instead, unless the job asks for ``spot_price: listed``;
``gpuorch plan`` shows both figures. Pure: offers in, prices out (docs/catalog.md, "Robust spot").
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuorch.provider.port import Offer

# "Far below": under half the median of the same type's spot prices in the region's other zones.
FAR_BELOW = 0.5


def _median(xs: list[float]) -> float:
    # statistics.median's answer; the daemon would otherwise import statistics for this one call
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def robust_spot_prices(offers: Sequence[Offer]) -> list[float | None]:
    """Per offer, the spot price to rank at: the listed one, or its siblings' median when the
    listed one is below ``FAR_BELOW`` of it. Offers without a spot price stay None; a zone with
    no sibling keeps its price (nothing to compare with)."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, o in enumerate(offers):
        if o.spot_price_per_hour is not None:
            groups.setdefault((o.provider, o.instance_type, o.region), []).append(i)
    out: list[float | None] = [o.spot_price_per_hour for o in offers]
    for rows in groups.values():
        if len(rows) < 2:
            continue
        prices = [offers[r].spot_price_per_hour for r in rows]
        for k, r in enumerate(rows):
            own = prices[k]
            assert own is not None
            siblings = _median([p for j, p in enumerate(prices) if j != k and p is not None])
            if own < FAR_BELOW * siblings:
                out[r] = siblings
    return out
