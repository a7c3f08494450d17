"""The provider contract suite against ``LambdaProvider`` on the fake Lambda API (real httpx client).

Time is the fake's: ``advance`` moves its clock (boot, the end of a termination). Lambda sells
no spot, so the preemption tests skip (no SupportsPreemptionInjection), and it forgets a
terminated instance, so its token is not answered after the end (``idempotent_after_terminate``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from fake_lambda import FakeLambda

from gpuorch.provider.port import Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_lambda import LambdaProvider

pytestmark = pytest.mark.lambdalabs
EPOCH = datetime(2026, 1, 1)


class TestLambdaProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    idempotent_after_terminate = False
    missing_instance_id = "0123456789abcdef0123456789abcdef"

    @pytest.fixture
    def provider(self, make_provider, fake: FakeLambda) -> LambdaProvider:
        self.fake = fake
        return make_provider()

    def advance(self, provider: Provider, seconds: float) -> None:
        self.fake.advance(seconds)

    def now(self, provider: Provider) -> datetime:
        return EPOCH + timedelta(seconds=self.fake.clock)

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        self.fake.refuse(offer.instance_type, offer.region)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        return self.fake.add_instance("my-notebook", offer.instance_type, offer.region)
