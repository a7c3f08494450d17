"""The provider contract suite against ``GcpProvider`` on the fake GCE (real SDK client).

Time is the fake's: ``advance`` moves its clock, which is how GCE's 30 s preemption notice
runs out (the reclaimed spot VM is then deleted, as ``instanceTerminationAction: DELETE`` does).
"""

from __future__ import annotations

from datetime import datetime

import pytest
from fake_gce import FakeGce

from gpuorch.provider.port import Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_gcp import GcpProvider

pytestmark = pytest.mark.gcp


class TestGcpProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    notice_s = 30.0  # GCE's preemption notice; fake time, so it costs nothing
    missing_instance_id = "us-central1-a/gpuorch-c0ffee000009-1-1"

    @pytest.fixture
    def provider(self, make_provider, fake: FakeGce) -> GcpProvider:
        self.fake = fake
        return make_provider()

    def advance(self, provider: Provider, seconds: float) -> None:
        self.fake.advance(seconds)

    def now(self, provider: Provider) -> datetime:
        return self.fake.now()

    def inject_preemption(self, provider: Provider, instance_id: str, notice_s: float) -> None:
        zone, name = instance_id.split("/", 1)
        self.fake.preempt(zone, name, notice_s)

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        self.fake.refuse("ZONE_RESOURCE_POOL_EXHAUSTED", zone=offer.zone, machine_type=offer.instance_type, spot=spot)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        self.fake.add_instance(offer.zone, "someone-elses-vm", {"owner": "someone-else"}, offer.instance_type)
        return f"{offer.zone}/someone-elses-vm"
