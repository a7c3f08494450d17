"""Recovery strategies: where a job goes after a preemption. Pure, registered by name.

A strategy receives the placement candidates that fit the job (filtered, backed-off offers
removed, cheapest first) and what the job's history says about recent preemptions, and returns
them in the order to try. The reconciler asks for the replacement as soon as a notice arrives
(in the same pass that drains the preempted attempt), so the strategy decides where the
replacement goes while the old instance still uploads its final checkpoint.

Select one per job (``recovery: {strategy: next-region-eagerly}`` in the job spec) or for the
whole daemon (``recovery_strategy`` in the daemon config; default ``same-region-first``).
A new strategy is a subclass of ``RecoveryStrategy`` decorated with ``@register``.

Common rules, whatever the strategy: a market (provider, zone, spot or on-demand) that preempted
or lost this job within ``RecoveryContext.avoid_s`` is tried last (a spot zone that just
reclaimed an instance rarely has capacity a minute later, and a replacement there would likely
be reclaimed with its predecessor; on-demand in that zone is not penalised by a spot reclaim);
and the preempted attempt's market kind (spot or on-demand) is tried before the other one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    from gpuorch.provider.port import Offer

DEFAULT_STRATEGY = "same-region-first"


class Choice(Protocol):
    """What a strategy reads of a placement candidate (``gpuorch.placement.Candidate``): its
    offer and market kind. Structural, so that this module needs nothing of placement, which
    depends on the job spec, which validates strategy names here."""

    @property
    def offer(self) -> Offer: ...

    @property
    def spot(self) -> bool: ...


C = TypeVar("C", bound=Choice)


@dataclass(frozen=True)
class RecoveryContext:
    """What a strategy knows about the job's recent preemptions (built by ``decide``).

    ``preempted_region``: ``(provider, region)`` of the newest preempted or lost attempt, None
    for a job that never was; ``preempted_spot``: whether that attempt ran on spot.
    ``recent``: the ``(provider, zone, spot)`` markets that preempted or lost this job within
    ``avoid_s`` seconds.
    """

    preempted_region: tuple[str, str] | None = None
    preempted_spot: bool | None = None
    recent: frozenset[tuple[str, str, bool]] = frozenset()
    avoid_s: float = 3600.0

    def is_recent(self, c: Choice) -> bool:
        return (c.offer.provider, c.offer.zone, c.spot) in self.recent

    def in_preempted_region(self, c: Choice) -> bool:
        return (c.offer.provider, c.offer.region) == self.preempted_region

    def other_market(self, c: Choice) -> bool:
        """Spot after a spot attempt, on-demand after an on-demand one, come first: a job on
        spot stays on spot while spot can be had somewhere (on-demand costs ~3x)."""
        return self.preempted_spot is not None and c.spot != self.preempted_spot


class RecoveryStrategy(ABC):
    """Orders candidates for a job's next attempt. Pure: no I/O, no clock."""

    name: ClassVar[str]

    @abstractmethod
    def rank(self, candidates: Sequence[C], ctx: RecoveryContext) -> list[C]:
        """The candidates in the order to try; never adds any. ``candidates`` come cheapest first
        and sorting is stable, so price order holds within each group a strategy forms."""


STRATEGIES: dict[str, RecoveryStrategy] = {}


def register(cls: type[RecoveryStrategy]) -> type[RecoveryStrategy]:
    STRATEGIES[cls.name] = cls()
    return cls


def strategy_names() -> list[str]:
    return sorted(STRATEGIES)


def get_strategy(name: str | None) -> RecoveryStrategy:
    """The strategy registered as ``name`` (None: the default). KeyError names the known ones."""
    key = name or DEFAULT_STRATEGY
    try:
        return STRATEGIES[key]
    except KeyError:
        raise KeyError(f"unknown recovery strategy {key!r}; known: {', '.join(strategy_names())}") from None


@register
class SameRegionFirst(RecoveryStrategy):
    """Stay in the preempted attempt's region if it can, then go anywhere, cheapest first.

    Keeps data locality (volumes, egress, a region-scoped bucket) when the region still has
    capacity elsewhere. The order: the same kind of market (spot after spot) in the same region,
    then in other regions; then the other kind (on-demand), same region first; then the markets
    that preempted recently.

    Example, a job on spot in us-east-1a (zones for sale: us-east-1a/1c, us-east-2a, us-west-2a;
    on-demand everywhere at 3x the spot price):

    1. 02:10:00 AWS announces us-east-1a reclaims the instance at 02:12:00. The same pass drains
       attempt 1 (its agent signals the job, which writes a final checkpoint) and requests
       attempt 2: spot in us-east-1c, the cheapest market left in us-east-1.
    2. 02:10:01 us-east-1c answers InsufficientInstanceCapacity: attempt 2 ends ``no_capacity``
       and attempt 3 asks for spot in us-east-2a (cheapest outside the region), in the same pass.
    3. 02:10:40 attempt 1's final checkpoint is durable; the daemon terminates it. Attempt 3's
       agent, which waited for that hand-off, restores it: almost nothing is lost.
    4. Until 03:10 (``avoid_s``), us-east-1a spot is tried only after everything else, even
       when it is the cheapest market again.
    """

    name = "same-region-first"

    def rank(self, candidates: Sequence[C], ctx: RecoveryContext) -> list[C]:
        near = ctx.preempted_region is not None
        return sorted(candidates, key=lambda c: (ctx.is_recent(c), ctx.other_market(c),
                                                 near and not ctx.in_preempted_region(c)))


@register
class NextRegionEagerly(RecoveryStrategy):
    """Leave the preempted attempt's region at once; come back only when nothing else is left.

    Capacity crunches are often regional (the zones of a region share a spot pool's demand), so
    a preemption in one zone announces more in its neighbours. Best for jobs with no data
    gravity (checkpoints in a multi-region bucket).

    Example, the same job and market as ``same-region-first``:

    1. 02:10:00 the notice for us-east-1a arrives. Attempt 1 drains; attempt 2 asks for spot in
       us-east-2a (the cheapest outside us-east-1), although us-east-1c is cheaper.
    2. 02:10:01 us-east-2a has no capacity; attempt 3 asks for us-west-2a spot.
    3. 02:25 us-west-2a reclaims attempt 3 without a notice. The next attempt goes back to
       us-east-1, to us-east-1c spot first (us-east-1a spot is still recent), and us-west-2a spot
       now comes last.
    """

    name = "next-region-eagerly"

    def rank(self, candidates: Sequence[C], ctx: RecoveryContext) -> list[C]:
        return sorted(candidates, key=lambda c: (ctx.is_recent(c), ctx.other_market(c), ctx.in_preempted_region(c)))


@register
class CheapestFirst(RecoveryStrategy):
    """Price alone decides, within the common rules (region-blind; close to gpuorch's original
    behaviour).

    Example: after a reclaim in us-east-1a, the replacement goes to whichever other market is
    cheapest right now, in any region; us-east-1a spot waits for ``avoid_s``.
    """

    name = "cheapest-first"

    def rank(self, candidates: Sequence[C], ctx: RecoveryContext) -> list[C]:
        return sorted(candidates, key=lambda c: (ctx.is_recent(c), ctx.other_market(c)))
