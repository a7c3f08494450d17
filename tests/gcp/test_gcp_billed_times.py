"""GCE's record of a VM's billed interval (issue 12, item 6), through the real SDK client against
the fake GCE: the launch time is ``creationTimestamp``; a reclaimed VM's end is its
``lastStopTimestamp`` (termination action STOP) or, once GCE deleted it (DELETE), the end of its
``compute.instances.preempted`` operation - whenever the daemon looks."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from fake_gce import FakeGce

from gpuorch.provider.port import InstanceState, LaunchRequest, Offer

pytestmark = pytest.mark.gcp


def request() -> LaunchRequest:
    offer = Offer(provider="gcp", region="us-central1", zone="us-central1-a", instance_type="g2-standard-4", gpu="L4",
                  gpu_count=1, gpu_memory_gib=24, price_per_hour=1.0, spot_price_per_hour=0.3)
    return LaunchRequest(job_id=7, attempt=1, offer=offer, spot=True, owner="c0ffee000001")


def close(a: datetime | None, b: datetime) -> bool:
    return a is not None and abs((a - b).total_seconds()) <= 0.001  # GCE's timestamps: milliseconds


def test_launch_time_is_the_creation_timestamp(provider, fake: FakeGce):
    before = fake.now()
    inst = provider.launch(request())
    got = provider.get(inst.id)
    assert got.created_at is not None and before - timedelta(seconds=0.001) <= got.created_at <= fake.now()
    assert got.ended_at is None


@pytest.mark.parametrize("action", ["DELETE", "STOP"])
def test_a_reclaim_is_billed_to_gces_end_not_to_a_late_look(make_provider, fake: FakeGce, action):
    provider = make_provider()
    inst = provider.launch(request())
    zone, name = inst.id.split("/")
    fake.instances[(zone, name)].setdefault("scheduling", {})["instanceTerminationAction"] = action
    provider.get(inst.id)  # seen running
    fake.advance(20)
    fake.preempt(zone, name, notice_s=30)
    reclaimed = fake.now() + timedelta(seconds=30)
    fake.advance(150)  # the daemon was away; it looks two minutes after the reclaim
    for got in (provider.get(inst.id), next(i for i in make_provider().list_managed() if i.id == inst.id)):
        assert got.state == InstanceState.PREEMPTED
        assert close(got.ended_at, reclaimed), (got.ended_at, reclaimed)
