"""The volume contract suite against ``AzureProvider``'s managed disks on the fake ARM (real SDK
client, TLS). Offers are zonal (``eastus-1``, ``eastus-2``), as ``catalog refresh --provider
azure`` writes them from resource_skus: a zonal disk attaches only to VMs of its zone."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure_helpers import StaticToken, options
from fake_arm import FakeArm

from gpuorch.provider.offer import Offer
from gpuorch.testing import VolumeContract
from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options

pytestmark = pytest.mark.azure


def zonal_offers(zones: tuple[str, ...] = ("1", "2")) -> list[Offer]:
    return [Offer(provider="azure", region="eastus", zone=f"eastus-{z}", instance_type="Standard_NC4as_T4_v3",
                  gpu="T4", gpu_count=1, gpu_memory_gib=16, vcpus=4, memory_gib=28, price_per_hour=0.526,
                  spot_price_per_hour=0.0526, billing_granularity_s=1, min_billing_s=60) for z in zones]


class TestAzureVolumeContract(VolumeContract):
    @property
    def missing_volume_id(self) -> str:  # type: ignore[override]
        return (f"/subscriptions/{self.arm.subscription}/resourceGroups/{self.arm.resource_group}/providers/"
                "Microsoft.Compute/disks/gpuorch-c0ffee000009-9-vol")

    @pytest.fixture
    def provider(self, arm: FakeArm, sleeps: list[float], tmp_path: Path):
        self.arm = arm
        p = AzureProvider(parse_options(options(arm)), home=tmp_path / "home", credential=StaticToken(arm.token),
                          sleep=sleeps.append, now=arm.now, monotonic=lambda: arm.clock, offers=zonal_offers())
        yield p
        p.close()
