"""The contract's price rule: a cloud sells at a positive price; owned capacity may be priced 0.

``Capabilities.owned_capacity`` (a declared capability, so every wrapper forwards it) is what allows a
price of 0: a cluster or SSH boxes the user already pays for. A negative or non-finite price is
wrong for everyone.
"""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
from prometheus_client import CollectorRegistry, Counter

from gpuorch.metrics.instrument import InstrumentedProvider
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch.testing.fake_provider import FakeProvider, default_offers


class OwnedFake(FakeProvider):
    capabilities = Capabilities(owned_capacity=True)


def priced(price: float, spot: float | None = None) -> list[Offer]:
    return [o.model_copy(update={"price_per_hour": price, "spot_price_per_hour": spot}) for o in default_offers()]


def check_offers(provider: Provider) -> None:
    ProviderContract().test_offers_are_the_providers_own_and_well_formed(provider)


def test_owned_capacity_is_a_declared_capability_off_by_default() -> None:
    assert "owned_capacity" in {f.name for f in fields(Capabilities)}
    assert FakeProvider().capabilities.owned_capacity is False


def test_owned_capacity_may_be_priced_zero() -> None:
    check_offers(OwnedFake(offers=priced(0.0)))
    check_offers(OwnedFake(offers=priced(0.0, spot=0.0)))
    check_offers(OwnedFake(offers=priced(1.5)))  # an internal or amortised rate is fine too


@pytest.mark.parametrize("spot", [None, 0.0])
def test_a_cloud_priced_zero_fails_the_contract(spot: float | None) -> None:
    price = 0.0 if spot is None else 1.0
    with pytest.raises(AssertionError):
        check_offers(FakeProvider(offers=priced(price, spot)))


@pytest.mark.parametrize("price", [-0.01, math.nan, math.inf])
@pytest.mark.parametrize("cls", [FakeProvider, OwnedFake])
def test_negative_or_non_finite_prices_fail_for_everyone(cls: type[FakeProvider], price: float) -> None:
    with pytest.raises(AssertionError):
        check_offers(cls(offers=priced(price)))
    with pytest.raises(AssertionError):
        check_offers(cls(offers=priced(1.0, spot=price)))


def test_the_metrics_wrapper_forwards_owned_capacity() -> None:
    r = CollectorRegistry()
    wrapped = InstrumentedProvider(OwnedFake(offers=priced(0.0)), Counter("c", "c", ["provider", "method"], registry=r),
                                   Counter("e", "e", ["provider", "method", "kind", "code"], registry=r))
    assert wrapped.capabilities.owned_capacity is True
    check_offers(wrapped)
