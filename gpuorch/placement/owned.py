"""Own capacity first, cloud burst after (DESIGN.md 4; docs/ssh-pools.md). Pure, no I/O.

Capacity the user owns (an SSH pool, a Kubernetes cluster: ``Capabilities.owned_capacity``) is
already paid for, so a job goes there whenever a free owned offer holds it and finishes by the
job's deadline, whatever a cloud's price. When every owned offer that holds the job is full (the
daemon backed its class off after a launch found its slots taken), the job waits for a slot up
to its spec's ``max_wait`` -- and never so long that the owned offer could no longer meet the
deadline -- and then bursts to the cheapest cloud offer. Without ``max_wait`` it bursts at once.
Caps are applied by the caller before this choice, to owned offers (at their configured price)
and clouds alike: one budget covers both.

``choose`` makes that choice from candidates already ranked and split by the caller (the
daemon's ``decide``, and ``gpuorch plan``, which shows both options and why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gpuorch.placement.rank import Candidate

Kind = Literal["owned", "wait", "burst"]
WAITS = "waits for owned capacity"  # how a waiting job's message starts (one event per wait)


@dataclass(frozen=True)
class OwnedChoice:
    """What a job with an owned option does now: ``owned`` (launch on ``free``), ``wait`` (for
    owned capacity, at most ``wait_s`` more seconds), or ``burst`` (to ``burst``, the cheapest
    cloud candidate; None when there is none). ``why`` is one sentence for events and ``plan``."""

    kind: Kind
    owned: Candidate | None  # the best owned candidate, free or full
    burst: Candidate | None  # the cheapest cloud candidate
    why: str
    free: tuple[Candidate, ...] = ()  # owned candidates not full, best first
    wait_s: float = 0.0


def owned_providers(providers: Mapping[str, Any]) -> frozenset[str]:
    """The names of ``providers`` (adapters or their classes) whose declared capabilities say
    they sell owned capacity (``Capabilities.owned_capacity``)."""
    return frozenset(name for name, p in providers.items() if p.capabilities.owned_capacity)


def _where(c: Candidate) -> str:
    o = c.offer
    return f"{o.provider} {o.zone} {o.instance_type} at ${c.total_price_per_hour:.2f}/h"


def minutes(s: float) -> str:
    """``s`` seconds as events and ``plan`` say a wait: "30 s", "5 min", "2.0 h"."""
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def choose(free: Sequence[Candidate], full: Sequence[Candidate], clouds: Sequence[Candidate], *,
           max_wait_s: float | None, waited_s: float, time_left_s: float | None,
           job_hours: float | None = None) -> OwnedChoice | None:
    """The choice for a job with owned candidates; None when it has none (plain ranking applies).

    ``free``: owned candidates a launch may take now, best first; ``full``: owned candidates
    backed off as full; ``clouds``: the other candidates, cheapest first. ``waited_s``: how long
    the job has waited for a launch; ``time_left_s``: seconds to its deadline (None: no deadline).
    An owned candidate meets the deadline when its expected finish (start-up included) fits in
    the time left (``job_hours``, the deadline's, replaces the ranking's hours of work); a wait
    of ``w`` more seconds is allowed while the best full one, started after it, still would. With
    no cloud candidate, a free owned one is taken even if late (nothing else can run the job).
    """
    if not free and not full:
        return None
    burst = clouds[0] if clouds else None
    best = free[0] if free else full[0]

    def finish_s(c: Candidate) -> float:
        work = c.est_hours if job_hours is None else job_hours
        return (c.est_finish_hours - c.est_hours + work) * 3600

    def meets(c: Candidate) -> bool:
        return time_left_s is None or finish_s(c) <= time_left_s

    on_time = tuple(c for c in free if meets(c))
    if on_time or (free and burst is None):
        take = on_time or tuple(free)
        why = f"owned capacity is free: {_where(take[0])}" + (
            f", done in {finish_s(take[0]) / 3600:.2f} h of the {time_left_s / 3600:.2f} h to the deadline"
            if time_left_s is not None else "")
        return OwnedChoice("owned", take[0], burst, why, take)
    if free:
        why = (f"owned capacity ({_where(free[0])}) would finish after the deadline "
               f"({finish_s(free[0]) / 3600:.2f} h, {max(0.0, time_left_s or 0.0) / 3600:.2f} h left)")
        return OwnedChoice("burst", best, burst, why + _to(burst))
    if max_wait_s is None:
        return OwnedChoice("burst", best, burst, f"owned capacity is full ({_where(best)}) and the job sets no "
                                                 f"max_wait" + _to(burst))
    left = max_wait_s - waited_s
    if time_left_s is not None:
        left = min(left, time_left_s - finish_s(best))
    if left > 0:
        then = f"then bursts to {_where(burst)}" if burst is not None else "no cloud offer to burst to"
        why = f"{WAITS} ({_where(best)} is full) up to max_wait {minutes(max_wait_s)}; {then}"
        return OwnedChoice("wait", best, burst, why, (), left)
    if waited_s >= max_wait_s:
        reason = f"waited {minutes(waited_s)}, max_wait is {minutes(max_wait_s)}"
    else:
        reason = "waiting longer would miss the deadline"
    return OwnedChoice("burst", best, burst, f"owned capacity is full ({_where(best)}); {reason}" + _to(burst))


def _to(burst: Candidate | None) -> str:
    return f"; bursts to {_where(burst)}" if burst is not None else "; no cloud offer to burst to"
