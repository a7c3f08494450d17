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

from gpuorch.jobs.spec import JobSpec
from gpuorch.placement.cost import INTERRUPTIONS_PER_HOUR, PlacementOptions
from gpuorch.placement.explain import Rejection, Shortfall
from gpuorch.placement.index import OfferIndex, index_for
from gpuorch.placement.rank import Candidate, Plan, plan
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


# Spec fields placement never reads (what runs, and what decide applies after ranking): left out
# of ``placement_key`` so that jobs differing only in them share a placement. Every other field,
# including one added later, is part of the key: at worst a memo miss, never a wrong answer.
# ``max_wait`` and ``deadline`` choose between the ranked candidates (owned capacity or a burst:
# ``decide.owned``), ``keep_warm`` whether a warm instance takes the job (``decide.warm``), the
# lifetime fields (``kind``, ``max_duration``, ``idle_stop``, ``idle_gpu_util``) when it ends, and
# ``notify`` whom to tell: none changes the ranking itself, which is all the memo holds. ``volume``'s
# size and type price its storage only with ``PlacementOptions.storage_rates``, never memoised.
NOT_PLACEMENT = frozenset({"name", "run", "setup", "workdir", "env", "retry", "recovery", "budget", "deadline",
                           "volume", "max_wait", "keep_warm", "kind", "max_duration", "idle_stop", "idle_gpu_util",
                           "notify"})
# The fields placement reads, or may (a field here that it does not read costs a memo miss, no
# more). Every JobSpec field is in exactly one of the two sets (tests/placement/test_fields.py).
PLACEMENT = frozenset({"resources", "model", "distributed", "nodes", "spot_policy", "spot_price",
                       "max_price_per_hour", "providers", "regions", "checkpoint", "image"})


def placement_key(spec: JobSpec) -> str:
    """What of ``spec`` may decide its candidates: jobs with equal keys get the same candidates
    from the same index (the volume's zone and the back-offs are keyed apart by ``candidates``)."""
    return spec.model_dump_json(exclude=set(NOT_PLACEMENT))


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

    Memoised on the index when ``avoid`` is None or a ``KeyedAvoid`` and ``options`` is None or
    sets nothing but ``max_nodes`` (the daemon's case: each provider's ``Capabilities.max_nodes``, so
    a gang only goes where it can be placed); a fresh list each call, so callers may reorder it."""
    gangs = _gang_key(options)
    if gangs is None or not (avoid is None or isinstance(avoid, KeyedAvoid)):
        return plan(spec, offers, avoid=avoid, volume_zone=volume_zone, options=options, limit=limit,
                    explain=False).candidates
    idx = index_for(offers)
    key = (placement_key(spec), volume_zone, limit, avoid.key if avoid is not None else None,
           gangs if spec.nodes > 1 else ())
    found = idx.placed.get(key)
    if found is None:
        found = plan(spec, idx, avoid=avoid, volume_zone=volume_zone, limit=limit, explain=False,
                     options=options).candidates
        if len(idx.placed) >= MEMO_SIZE:
            del idx.placed[next(iter(idx.placed))]
        idx.placed[key] = found
    return list(found)


def _gang_key(options: PlacementOptions | None) -> tuple[tuple[str, int], ...] | None:
    """What of ``options`` a memo key needs: () without options, the ``max_nodes`` items when that
    is all they set; None when they set anything else (then nothing is memoised)."""
    if options is None:
        return ()
    limits = options.max_nodes
    if options != PlacementOptions(max_nodes=limits):
        return None
    return tuple(sorted(limits.items())) if limits is not None else ()


def fits(spec: JobSpec, offer: Offer) -> bool:
    """Whether ``offer`` can run ``spec`` in some market (provider/region/price constraints included)."""
    return bool(candidates(spec, OfferIndex([offer]), limit=1))
