"""Billing rules: how a provider turns seconds of running time into billed seconds.

Each rule is an increment (billed time is rounded up to a multiple of it) and a minimum charge
per start. The core holds the rule type and its arithmetic; each adapter declares its own rule
in its catalog (``gpuorch_<cloud>/catalog.py``, found through ``gpuorch.catalog.registry.catalogs``),
with its sources (docs/catalog.md, "Billing rules"). A provider no installed adapter declares
bills per hour with a 1 hour minimum: an overestimate rather than a surprise.

Pure functions; later cost accounting (attempt costs, budgets) reuses ``billed_seconds`` and
``cost`` so estimates and bills round the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


class _Billable(Protocol):
    billing_granularity_s: int
    min_billing_s: int


@dataclass(frozen=True)
class BillingRule:
    increment_s: int = 1
    minimum_s: int = 0

    def billed(self, seconds: Any) -> Any:
        """Billed seconds for ``seconds`` of running time: 0 if it never ran, else rounded up to
        the increment and at least the minimum. Works on floats and numpy arrays alike."""
        units = -(-seconds // self.increment_s)  # ceil division
        billed = units * self.increment_s
        billed = billed + (self.minimum_s - billed) * (billed < self.minimum_s)
        return billed * (seconds > 0)


DEFAULT_RULE = BillingRule(3600, 3600)

T = TypeVar("T")


def rule_for(rule_or_offer: BillingRule | _Billable) -> BillingRule:
    """The rule itself, or the one an offer carries (its catalog row). A provider's rule by name:
    ``gpuorch.catalog.registry.billing_rule``."""
    if isinstance(rule_or_offer, BillingRule):
        return rule_or_offer
    return BillingRule(int(rule_or_offer.billing_granularity_s), int(rule_or_offer.min_billing_s))


def billed_seconds(provider_or_offer: BillingRule | _Billable, seconds: T) -> T:
    return rule_for(provider_or_offer).billed(seconds)


def cost(provider_or_offer: BillingRule | _Billable, seconds: float, price_per_hour: float) -> float:
    """USD for ``seconds`` of running time at ``price_per_hour``, rounded as the provider bills."""
    return price_per_hour * billed_seconds(provider_or_offer, seconds) / 3600.0
