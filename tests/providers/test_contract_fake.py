"""The provider contract suite against ``FakeProvider`` (in memory, fake clock: no real waiting)."""

from __future__ import annotations

from datetime import datetime

import pytest

from gpuorch.clock import FakeClock
from gpuorch.provider.port import Provider
from gpuorch.testing import ProviderContract
from gpuorch.testing.fake_provider import FakeProvider


class TestFakeProviderContract(ProviderContract):
    notice_s = 30.0  # GCP-like; costs nothing on a fake clock

    @pytest.fixture
    def provider(self) -> FakeProvider:
        return FakeProvider(FakeClock(), boot_s=20.0)

    def advance(self, provider: Provider, seconds: float) -> None:
        assert isinstance(provider, FakeProvider)
        provider.clock.advance(seconds)

    def now(self, provider: Provider) -> datetime:
        assert isinstance(provider, FakeProvider)
        return provider.clock.now()
