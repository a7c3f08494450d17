"""What an attempt costs: its price for the time it was billed, rounded by the provider's rules."""

from __future__ import annotations

import math
from datetime import datetime

from .store.models import Attempt


def billed_seconds(seconds: float, granularity_s: int, minimum_s: int) -> float:
    if seconds <= 0:
        return 0.0
    g = max(1, granularity_s)
    return float(max(minimum_s, math.ceil(seconds / g) * g))


def attempt_cost(a: Attempt, now: datetime) -> float:
    """Billing runs from the launch to the end (or now, while it runs)."""
    if a.launched_at is None:
        return 0.0
    end = a.ended_at or now
    secs = billed_seconds((end - a.launched_at).total_seconds(), a.billing_granularity_s, a.min_billing_s)
    return a.price_per_hour * secs / 3600.0
