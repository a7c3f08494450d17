"""The provider contract suite against ``AwsProvider`` on in-process moto.

moto's instances run at once and keep no clock, so time here is the harness's: ``advance``
moves a counter and fires the spot interruptions that are due, which makes the suite take no
real time. What moto lacks (capacity errors, scheduled events, interruptions) comes from
``moto_helpers``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from moto_helpers import Refusals, announce_reclaim, interrupt_spot

from gpuorch.clock import utcnow
from gpuorch.provider.port import Offer, Provider
from gpuorch.testing import ProviderContract
from gpuorch_aws import AwsProvider

pytestmark = pytest.mark.aws


class TestAwsProviderContract(ProviderContract):
    boot_timeout_s = 5.0
    end_timeout_s = 5.0
    notice_s = 120.0  # EC2's spot notice; harness time, so it costs nothing

    @pytest.fixture
    def provider(self, make_provider: Any) -> AwsProvider:
        self.elapsed = 0.0
        self.due: list[tuple[float, str, str]] = []  # (harness time, region, instance id)
        return make_provider()

    @pytest.fixture
    def offer(self, provider: AwsProvider, moto_offers: list[Offer]) -> Offer:
        """The base class's choice (cheapest with a spot market), from offers listed once per run."""
        return min((o for o in moto_offers if o.spot_price_per_hour is not None), key=lambda o: o.price_per_hour)

    def advance(self, provider: Provider, seconds: float) -> None:
        self.elapsed += seconds
        for at, region, instance_id in [d for d in self.due if d[0] <= self.elapsed]:
            interrupt_spot(region, instance_id)
            self.due.remove((at, region, instance_id))

    def now(self, provider: Provider) -> Any:
        return utcnow() + timedelta(seconds=self.elapsed)

    def inject_preemption(self, provider: Provider, instance_id: str, notice_s: float) -> None:
        region = provider.get(instance_id).region
        announce_reclaim(region, instance_id, self.now(provider) + timedelta(seconds=notice_s))
        self.due.append((self.elapsed + notice_s, region, instance_id))

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        assert isinstance(provider, AwsProvider)

        def same_market(body: dict[str, Any]) -> bool:
            return (body.get("InstanceType") == offer.instance_type
                    and body.get("Placement.AvailabilityZone") == offer.zone
                    and (body.get("InstanceMarketOptions.MarketType") == "spot") == spot)

        Refusals(provider.client(offer.region), "RunInstances", "InsufficientInstanceCapacity", when=same_market)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        assert isinstance(provider, AwsProvider)
        resp = provider.client(offer.region).run_instances(
            ImageId="ami-0d1a0000000000001", InstanceType=offer.instance_type, MinCount=1, MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "owner", "Value": "someone-else"}]}])
        return str(resp["Instances"][0]["InstanceId"])
