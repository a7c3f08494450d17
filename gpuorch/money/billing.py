"""Billing rules: how a provider turns seconds of running time into billed seconds.

Each rule is an increment (billed time is rounded up to a multiple of it) and a minimum charge
per start. Sources and their uncertainty are in docs/catalog.md ("Billing rules"):

- AWS EC2, Linux (on-demand, spot, reserved): per second, 60 s minimum (AWS, 2017-10-02).
- GCP Compute Engine (VMs, GPUs, spot VMs): per second, 1 minute minimum.
- Azure VMs: per second (the global pricing pages); from 2025-06-01 a VM stopped within its
  first 300 s is billed 300 s (Microsoft's notice, quoted on Microsoft Q&A 2259765), so a 300 s
  minimum. Medium confidence; the older per-minute text is Azure China's (docs.azure.cn).
- Unknown providers: per hour, 1 hour minimum -- an overestimate rather than a surprise.

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


RULES: dict[str, BillingRule] = {
    "aws": BillingRule(1, 60),
    "gcp": BillingRule(1, 60),
    "azure": BillingRule(1, 300),
    "local": BillingRule(1, 0),
    "fake": BillingRule(1, 0),
    "sim": BillingRule(1, 0),
}
DEFAULT_RULE = BillingRule(3600, 3600)

T = TypeVar("T")


def rule_for(provider_or_offer: str | BillingRule | _Billable) -> BillingRule:
    """The rule of a provider name, or the one an offer carries (its catalog row wins)."""
    if isinstance(provider_or_offer, BillingRule):
        return provider_or_offer
    if isinstance(provider_or_offer, str):
        return RULES.get(provider_or_offer.lower(), DEFAULT_RULE)
    return BillingRule(int(provider_or_offer.billing_granularity_s), int(provider_or_offer.min_billing_s))


def billed_seconds(provider_or_offer: str | BillingRule | _Billable, seconds: T) -> T:
    return rule_for(provider_or_offer).billed(seconds)


def cost(provider_or_offer: str | BillingRule | _Billable, seconds: float, price_per_hour: float) -> float:
    """USD for ``seconds`` of running time at ``price_per_hour``, rounded as the provider bills."""
    return price_per_hour * billed_seconds(provider_or_offer, seconds) / 3600.0
