"""The provider contract suite against the sim provider (real traces at 1x: the test's few
seconds stay in the first tick, where the chosen zone sells spot)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sim_data import PRICES, TRACES

from gpuorch.clock import utcnow
from gpuorch.provider.localdir.instances import InstanceDir, Meta
from gpuorch.provider.port import InstanceState, Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_sim.provider import SimProvider


class TestSimProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    notice_s = 0.5
    missing_instance_id = "sim-0-0"

    @pytest.fixture
    def provider(self, make_sim) -> SimProvider:
        return make_sim(traces=str(TRACES), prices=str(PRICES), time_scale=1.0, boot_s=0.2)

    @pytest.fixture
    def offer(self, provider: SimProvider) -> Offer:
        """A zone whose trace sells spot at its first tick."""
        return next(o for o in provider.offers() if o.zone == "us-west-2b")

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        assert isinstance(provider, SimProvider)
        now = utcnow()
        inst = InstanceDir(provider.instances_dir / "sim-foreign")
        inst.create(Meta(id=inst.id, client_token="someone-else", tags={"owner": "someone-else"}, offer=offer,
                         spot=False, state=InstanceState.RUNNING, created_at=now, ready_at=now - timedelta(1)))
        return inst.id


def test_the_chosen_zone_sells_spot_at_the_start(make_sim):
    sim = make_sim(traces=str(TRACES), time_scale=1.0)
    assert sim.market.spot_available("us-west-2b", sim.market.clock.origin)
    assert Path(sim.home / "market.json").exists()
