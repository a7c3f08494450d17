"""Placement: which offer a job runs on. Pure functions, no I/O.

Ranks every (offer, spot?) pair that holds the job by expected total cost -- price times the
estimated hours rounded to the billing increment, plus start-up, checkpoint restore and egress,
plus for spot the expected preemption overhead -- and breaks ties by the earlier finish.
Offers the caller wants to avoid (a zone that just preempted us, a backed-off instance type)
are skipped through the ``avoid`` predicate. README "How gpuorch chooses a GPU" has a worked example.

``candidates(spec, offers, avoid=None)`` is what the daemon calls; ``plan`` adds the reasons
offers were rejected (``gpuorch plan``). Both accept an ``OfferIndex`` to skip re-indexing a
catalog, and ``limit`` to rank only the head of a large catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuorch.jobs.spec import JobSpec
from gpuorch.placement.cost import INTERRUPTIONS_PER_HOUR, PlacementOptions
from gpuorch.placement.explain import Rejection, Shortfall
from gpuorch.placement.index import OfferIndex, index_for
from gpuorch.placement.rank import Candidate, Plan, plan
from gpuorch.provider.port import Offer

__all__ = [
    "INTERRUPTIONS_PER_HOUR",
    "Candidate",
    "OfferIndex",
    "Plan",
    "PlacementOptions",
    "Rejection",
    "Shortfall",
    "candidates",
    "fits",
    "index_for",
    "plan",
]


def candidates(
    spec: JobSpec,
    offers: Sequence[Offer] | OfferIndex,
    avoid: Callable[[Candidate], bool] | None = None,
    *,
    volume_zone: str | None = None,
    options: PlacementOptions | None = None,
    limit: int | None = None,
) -> list[Candidate]:
    """Every pair that holds ``spec`` (at most ``limit``), cheapest expected total first."""
    result = plan(spec, offers, avoid=avoid, volume_zone=volume_zone, options=options, limit=limit, explain=False)
    return result.candidates


def fits(spec: JobSpec, offer: Offer) -> bool:
    """Whether ``offer`` can run ``spec`` in some market (provider/region/price constraints included)."""
    return bool(candidates(spec, OfferIndex([offer]), limit=1))
