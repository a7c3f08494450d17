"""The provider contract suite against ``AzureProvider`` on the fake ARM (real SDK client, TLS).

Time is the fake's: ``advance`` moves its clock. ARM announces no eviction ahead of time (Azure
tells only the VM itself, through Scheduled Events, which the agent reads), so the preemption
test is Azure's own: the VM lives through the notice with no deadline on it, then reads
PREEMPTED once Azure has deleted it.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from fake_arm import FakeArm

from gpuorch.provider.port import InstanceState, Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_azure import AzureProvider

pytestmark = pytest.mark.azure


class TestAzureProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    notice_s = 30.0  # Azure's spot eviction notice; fake time, so it costs nothing
    missing_instance_id = "gpuorch-c0ffee000009-1-1"

    @pytest.fixture
    def provider(self, make_provider, arm: FakeArm) -> AzureProvider:
        self.arm = arm
        return make_provider()

    def advance(self, provider: Provider, seconds: float) -> None:
        self.arm.advance(seconds)

    def now(self, provider: Provider) -> datetime:
        return self.arm.now()

    def inject_preemption(self, provider: Provider, instance_id: str, notice_s: float) -> None:
        self.arm.evict(instance_id, notice_s)

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        # The hard case: the create is accepted, then its operation fails and leaves a VM behind.
        self.arm.refuse("AllocationFailed", "Allocation failed. We do not have sufficient capacity.",
                        stage="operation", size=offer.instance_type, region=offer.region, spot=spot)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        self.arm.add_vm("someone-elses-vm", offer.region, offer.instance_type, {"owner": "someone-else"})
        return "someone-elses-vm"

    def test_preempted_instance_carries_its_deadline_then_reads_preempted(
        self, provider: Provider, offer: Offer, job_id: int, launch
    ) -> None:
        """Azure's version: no deadline from ARM (documented), alive through the notice, then
        PREEMPTED (not just gone) once the eviction deleted the VM."""
        inst = launch(self.request(offer, job_id, spot=True))
        self.wait_running(provider, inst.id)
        self.inject_preemption(provider, inst.id, self.notice_s)
        noticed = provider.get(inst.id)
        assert noticed.state.alive and noticed.preemption_deadline is None
        self.advance(provider, self.notice_s)
        assert inst.id not in self.arm.vms, "eviction policy Delete: Azure deleted the VM"
        gone = provider.get(inst.id)
        # ARM keeps no record of a VM it deleted: no end time (the daemon's look stands).
        assert gone.state == InstanceState.PREEMPTED and gone.ended_at is None
        assert inst.id in {i.id for i in provider.list_managed() if i.state == InstanceState.PREEMPTED}
        provider.terminate(inst.id)  # the daemon's cleanup of a reclaimed instance is quiet too

