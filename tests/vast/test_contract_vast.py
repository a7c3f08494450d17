"""The provider contract, run against the Vast adapter: the real ``vastai`` client against the fake
Vast API on 127.0.0.1 (``fake_vast.py``). Vast gives no notice before an outbid, so the
preemption-injection tests skip; test_vast_instances.py and the harness test cover the outbid."""

from __future__ import annotations

import pytest
from fake_vast import FakeVast

from gpuorch.provider.port import Offer, Provider
from gpuorch.testing import ProviderContract

pytestmark = pytest.mark.vast


class TestVastContract(ProviderContract):
    missing_instance_id = "987654321"
    boot_timeout_s = 10.0
    end_timeout_s = 10.0

    @pytest.fixture
    def provider(self, vast: Provider) -> Provider:
        return vast

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        self._fake.take_all()

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        return str(self._fake.create_foreign())

    @pytest.fixture(autouse=True)
    def _keep_fake(self, fake: FakeVast) -> None:
        self._fake = fake
