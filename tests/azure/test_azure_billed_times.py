"""Azure's record of a VM's billed interval (issue 12, item 6), through the real SDK client against
the fake ARM: the launch time is ``timeCreated``; the end, the instance view's dated status of a
VM that stopped (an eviction's deallocation); none for a deleted VM (ARM keeps no record of it)."""

from __future__ import annotations

import datetime as dt

import pytest
from fake_arm import FakeArm

from gpuorch.provider.port import InstanceState, LaunchRequest, Offer
from gpuorch_azure.parse import stopped_at

pytestmark = pytest.mark.azure


def req(spot: bool = True) -> LaunchRequest:
    offer = Offer(provider="azure", region="eastus", zone="eastus", instance_type="Standard_NC4as_T4_v3", gpu="T4",
                  gpu_count=1, gpu_memory_gib=15, price_per_hour=0.526, spot_price_per_hour=0.06)
    return LaunchRequest(job_id=7, attempt=1, offer=offer, spot=spot, owner="c0ffee000001")


def test_the_stop_time_is_the_power_status_time_else_the_provisioning_one():
    def vm(*statuses):
        return {"properties": {"instanceView": {"statuses": list(statuses)}}}
    t1, t2 = "2026-11-28T08:48:26.5+00:00", "2026-11-28T08:50:00Z"
    assert stopped_at(vm({"code": "ProvisioningState/succeeded", "time": t1}, {"code": "PowerState/deallocated"})) \
        == dt.datetime(2026, 11, 28, 8, 48, 26, 500000, tzinfo=dt.UTC)
    assert stopped_at(vm({"code": "ProvisioningState/succeeded", "time": t1},
                         {"code": "PowerState/deallocated", "time": t2})) == dt.datetime(2026, 11, 28, 8, 50,
                                                                                         tzinfo=dt.UTC)
    assert stopped_at(vm({"code": "PowerState/deallocated"})) is None
    assert stopped_at({}) is None


def test_an_evicted_vm_is_billed_until_its_deallocation(make_provider, arm: FakeArm):
    provider = make_provider(eviction_policy="Deallocate")
    created = arm.now()
    inst = provider.launch(req())
    assert inst.created_at == created
    arm.advance(45)
    assert provider.get(inst.id).ended_at is None  # running: no end
    evicted = arm.now()
    arm.evict(inst.id)
    arm.advance(120)  # the daemon looks two minutes later
    got = provider.get(inst.id)
    assert got.state == InstanceState.PREEMPTED and got.ended_at == evicted


def test_a_vm_we_deleted_reports_no_end(provider, arm: FakeArm):
    """ARM keeps no record of a deleted VM: the daemon bills it until its own delete call."""
    inst = provider.launch(req())
    arm.advance(30)
    provider.get(inst.id)  # seen running
    provider.terminate(inst.id)
    arm.advance(90)
    got = provider.get(inst.id)
    assert got.state == InstanceState.TERMINATED and got.ended_at is None
