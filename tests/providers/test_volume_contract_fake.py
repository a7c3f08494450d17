"""The volume contract suite against ``FakeProvider`` (in memory)."""

from __future__ import annotations

import pytest

from gpuorch.clock import FakeClock
from gpuorch.testing import VolumeContract
from gpuorch.testing.fake_provider import FakeProvider


class TestFakeVolumeContract(VolumeContract):
    missing_volume_id = "fake-vol-0"

    @pytest.fixture
    def provider(self) -> FakeProvider:
        return FakeProvider(FakeClock())
