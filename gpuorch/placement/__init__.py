"""Placement: which offer a job runs on. Pure functions, no I/O.

Ranks every (offer, spot?) pair that holds the job by expected total cost -- price times the
estimated hours rounded to the billing increment, plus start-up, checkpoint restore and egress,
plus for spot the expected preemption overhead -- and breaks ties by the earlier finish.
Offers the caller wants to avoid (a zone that just preempted us, a backed-off instance type)
are skipped through the ``avoid`` predicate. README "How gpuorch chooses a GPU" has a worked example.

``candidates(spec, offers, avoid=None)`` is what the daemon calls; ``plan`` adds the reasons
offers were rejected (``gpuorch plan``). Both accept an ``OfferIndex`` to skip re-indexing a
catalog, and ``limit`` to rank only the head of a large catalog.

One path for all callers: the daemon keeps one ``OfferIndex`` per catalog refresh
(``reconciler.observe.OfferCache.index``) and hands it to ``decide``; ``plan`` and the
benchmarks go through the same ``plan`` over an index. With an ``avoid`` that is a
``KeyedAvoid`` (or none), ``candidates`` memoises its answer on the index by the parts of the
spec placement reads (``placement_key``), so a queue of jobs with the same needs costs one
ranking and then a dict lookup each.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuorch.jobs.spec import JobSpec
from gpuorch.placement.cost import INTERRUPTIONS_PER_HOUR, PlacementOptions
from gpuorch.placement.explain import Rejection, Shortfall
from gpuorch.placement.index import OfferIndex, index_for
from gpuorch.placement.rank import Candidate, Plan, plan
from gpuorch.placement.requirements import Needs
from gpuorch.provider.port import Offer

__all__ = [
    "INTERRUPTIONS_PER_HOUR",
    "Candidate",
    "KeyedAvoid",
    "OfferIndex",
    "Plan",
    "PlacementOptions",
    "Rejection",
    "Shortfall",
    "candidates",
    "fits",
    "index_for",
    "placement_key",
    "plan",
]

MEMO_SIZE = 8192  # memoised placements kept per index (oldest dropped first)


@dataclass(frozen=True)
class KeyedAvoid:
    """An ``avoid`` predicate with a value that stands for it: two with equal keys avoid the same
    candidates (the daemon's key is the set of back-off keys in force), so a placement made
    under one can be reused under the other."""

    key: Hashable
    test: Callable[[Candidate], bool]

    def __call__(self, c: Candidate) -> bool:
        return self.test(c)


def placement_key(spec: JobSpec) -> tuple[Any, ...]:
    """Every part of ``spec`` that ``plan`` reads to rank candidates (explanations aside): jobs
    with equal keys get the same candidates from the same index. ``Needs`` carries what decides
    fit and runtime, so a field added there is part of the key without a change here."""
    ckpt = spec.checkpoint
    return (Needs.of(spec), tuple(spec.regions or ()), tuple(spec.providers or ()), spec.max_price_per_hour,
            spec.spot_policy, (ckpt.url.scheme, ckpt.interval) if ckpt is not None else None)


def candidates(
    spec: JobSpec,
    offers: Sequence[Offer] | OfferIndex,
    avoid: Callable[[Candidate], bool] | None = None,
    *,
    volume_zone: str | None = None,
    options: PlacementOptions | None = None,
    limit: int | None = None,
) -> list[Candidate]:
    """Every pair that holds ``spec`` (at most ``limit``), cheapest expected total first.

    Memoised on the index when ``avoid`` is None or a ``KeyedAvoid`` and ``options`` is None
    (the daemon's case); a fresh list each call, so callers may reorder it."""
    if options is not None or not (avoid is None or isinstance(avoid, KeyedAvoid)):
        return plan(spec, offers, avoid=avoid, volume_zone=volume_zone, options=options, limit=limit,
                    explain=False).candidates
    idx = index_for(offers)
    key = (placement_key(spec), volume_zone, limit, avoid.key if avoid is not None else None)
    found = idx.placed.get(key)
    if found is None:
        found = plan(spec, idx, avoid=avoid, volume_zone=volume_zone, limit=limit, explain=False).candidates
        if len(idx.placed) >= MEMO_SIZE:
            del idx.placed[next(iter(idx.placed))]
        idx.placed[key] = found
    return list(found)


def fits(spec: JobSpec, offer: Offer) -> bool:
    """Whether ``offer`` can run ``spec`` in some market (provider/region/price constraints included)."""
    return bool(candidates(spec, OfferIndex([offer]), limit=1))
