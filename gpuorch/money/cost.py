"""What an attempt costs: its price over the time it was billed, by the provider's billing rules.

The billing model (``docs/money.md``). Billing runs from ``launched_at`` to ``ended_at`` (or now)
in *increments* of ``billing_granularity_s`` seconds (1 for per-second billing, 3600 for hourly).

- An increment is charged in full the moment it begins, at the price in force at its start
  (for spot, the latest price recorded in ``Attempt.price_changes``).
- The minimum (``min_billing_s``) is billed in whole increments, all charged at launch at the
  launch price ``Attempt.price_per_hour``.

So the cost so far never decreases, an attempt that ran D seconds is billed for
``billed_seconds(D)``, and each charge lands at a definite instant, which is what splits costs by
day and what the budget (``gpuorch.money.caps``) projects forward. The provider catalog's billing
rules (granularity and minimum per provider/market) feed the two fields on the attempt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from gpuorch.clock import aware


class Billed(Protocol):
    """What billing reads of an attempt: a ``store.models.Attempt``, or a ``store.lite.Row`` of one."""

    launched_at: datetime | None
    ended_at: datetime | None
    price_per_hour: float
    billing_granularity_s: int
    min_billing_s: int
    price_changes: str | None


def _increments(seconds: float, granularity_s: int, minimum_s: int) -> tuple[int, int, int]:
    """(increment length, increments charged at launch, increments charged after D seconds)."""
    g = max(1, int(granularity_s))
    at_launch = max(1, math.ceil(max(0, minimum_s) / g))
    return g, at_launch, max(at_launch, math.ceil(seconds / g)) if seconds > 0 else 0


def billed_seconds(seconds: float, granularity_s: int, minimum_s: int) -> float:
    """Seconds billed for ``seconds`` of running: rounded up to the increment, at least the minimum."""
    g, _, n = _increments(seconds, granularity_s, minimum_s)
    return float(n * g)


def increment_cost(a: Billed) -> float:
    """USD of one billing increment at the attempt's current price."""
    return current_price(a) * max(1, a.billing_granularity_s) / 3600.0


def price_changes(a: Billed) -> list[tuple[float, float]]:
    """Recorded price changes as (epoch seconds, USD per hour), oldest first."""
    if not a.price_changes:
        return []
    return [(float(t), float(p)) for t, p in json.loads(a.price_changes)]


def with_price_change(a: Billed, at: datetime, price: float) -> str:
    """The ``price_changes`` JSON with one more change appended (never before the launch)."""
    start = a.launched_at.timestamp() if a.launched_at else at.timestamp()
    changes = price_changes(a) + [(max(at.timestamp(), start), price)]
    return json.dumps(changes)


def ran(a: Billed) -> bool:
    """Whether the attempt got an instance (what billing starts at), rather than a launch the
    provider refused (no capacity, quota) or one still being made: a run, not only a try."""
    return a.launched_at is not None


def current_price(a: Billed) -> float:
    changes = price_changes(a)
    return changes[-1][1] if changes else a.price_per_hour


def price_move(a: Billed, node_price: float | None, nodes: int, seen_at: datetime) -> tuple[datetime, float] | None:
    """The change to record when the catalog read at ``seen_at`` lists ``node_price`` (USD/h of
    one instance) for a launched attempt's market, or None if it is the price in force.

    An attempt's prices (``price_per_hour`` and every change) are what the whole attempt bills:
    a gang of ``nodes`` instances is every node at the node price (the launch records it so,
    ``reconciler.launching.gang_candidate``). A change takes effect no earlier than the launch:
    a catalog read before the attempt existed says nothing about what it paid before then."""
    if node_price is None or a.launched_at is None:
        return None
    price = node_price * max(1, nodes)  # provider.gang.gang_cost_per_hour (not imported: status stays light)
    if abs(price - current_price(a)) <= 1e-9:
        return None
    return max(seen_at, aware(a.launched_at) or seen_at), price


def charged(price_per_hour: float, granularity_s: int, minimum_s: int, seconds: float,
            changes: Sequence[tuple[float, float]] = ()) -> float:
    """USD charged in the first ``seconds`` of billing; ``changes`` as (offset s, USD/h), in order.

    Closed form over price segments: O(number of changes), whatever the granularity.
    """
    g, at_launch, n = _increments(seconds, granularity_s, minimum_s)
    if n == 0:
        return 0.0
    total = at_launch * g * price_per_hour
    segments = [(0.0, price_per_hour)] + [(max(0.0, off), p) for off, p in changes]
    for i, (lo, price) in enumerate(segments):  # price p_i from offset lo_i to the next change
        hi = segments[i + 1][0] if i + 1 < len(segments) else math.inf
        first = max(at_launch, math.ceil(lo / g))
        last = n if hi == math.inf else min(n, math.ceil(hi / g))
        if last > first:
            total += (last - first) * g * price
    return total / 3600.0


def _cost(a: Billed, seconds: float) -> float:
    if a.launched_at is None:
        return 0.0
    launch = a.launched_at.timestamp()
    changes = [(t - launch, p) for t, p in price_changes(a)]
    return charged(a.price_per_hour, a.billing_granularity_s, a.min_billing_s, seconds, changes)


def cost_until(a: Billed, t: datetime, now: datetime | None = None) -> float:
    """USD charged by time ``t``: as if the attempt had stopped at ``t`` (if it ran that long)."""
    if a.launched_at is None:
        return 0.0
    end = a.ended_at or now or t
    stop = min(t, end)
    return _cost(a, (stop - a.launched_at).total_seconds())


def attempt_cost(a: Billed, now: datetime) -> float:
    """Billing runs from the launch to the end (or now, while it runs)."""
    return cost_until(a, a.ended_at or now, now)


def cost_between(a: Billed, start: datetime | None, end: datetime, now: datetime) -> float:
    """USD charged in [start, end): what the attempt added to a day, or since ``--since``."""
    before = cost_until(a, start, now) if start is not None else 0.0
    return max(0.0, cost_until(a, end, now) - before)


def projected_cost(a: Billed, until: datetime, now: datetime) -> float:
    """USD charged by ``until`` if the attempt runs (at its current price) until then.

    An attempt not launched yet is projected as if launched ``now``.
    """
    if a.ended_at is not None:
        return attempt_cost(a, now)
    launched = a.launched_at or now
    seconds = (until - launched).total_seconds()
    if a.launched_at is None:
        return charged(a.price_per_hour, a.billing_granularity_s, a.min_billing_s, seconds)
    return _cost(a, seconds)
