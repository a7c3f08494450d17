"""The shipped provider contract against the RunPod adapter and the fake RunPod API.

RunPod announces no reclaim ahead (an interruptible pod gets a SIGTERM and is stopped), so the
two notice-based preemption tests are replaced by RunPod's own: a reclaimed pod reads PREEMPTED,
dated at the reclaim."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fake_runpod import FakeRunpod

from gpuorch.provider import InstanceState, Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_runpod.catalog import parse_instance_type
from gpuorch_runpod.provider import RunpodProvider

pytestmark = pytest.mark.runpod


class TestRunpodContract(ProviderContract):
    boot_timeout_s = 10.0
    end_timeout_s = 10.0
    missing_instance_id = "abcdef01234567"

    @pytest.fixture
    def provider(self, rp: RunpodProvider, fake: FakeRunpod) -> Provider:
        rp.fake = fake  # type: ignore[attr-defined]  # the hooks below reach the fake through it
        return rp

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        parsed = parse_instance_type(offer.instance_type)
        assert parsed is not None
        provider.fake.out_of_stock(parsed[0], offer.region, spot)  # type: ignore[attr-defined]

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        return str(provider.fake.add_unmanaged())  # type: ignore[attr-defined]

    def test_preempted_instance_carries_its_deadline_then_reads_preempted(self, provider, offer, job_id, launch):
        inst = launch(self.request(offer, job_id, spot=True))
        assert inst.spot
        self.wait_running(provider, inst.id)
        at = provider.fake.reclaim(inst.id)
        gone = provider.get(inst.id)
        assert gone.state == InstanceState.PREEMPTED and gone.preemption_deadline is None
        assert gone.ended_at is not None and abs(gone.ended_at - at) <= timedelta(seconds=1)
        provider.terminate(inst.id)  # the daemon's cleanup of a reclaimed pod
        assert provider.get(inst.id).state == InstanceState.PREEMPTED, "the tombstone keeps how it ended"
        assert inst.id not in provider.fake.pods

    def test_a_reclaim_is_dated_at_its_deadline_not_at_a_late_look(self, provider, offer, job_id, launch):
        inst = launch(self.request(offer, job_id, spot=True))
        at = provider.fake.reclaim(inst.id)
        self.advance(provider, self.late_look_s)
        assert abs(provider.get(inst.id).ended_at - at) <= timedelta(seconds=1)
