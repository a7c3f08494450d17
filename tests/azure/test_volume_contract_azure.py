"""The volume contract suite against ``AzureProvider``'s managed disks on the fake ARM (real SDK
client, TLS). Offers are zonal (``eastus-1``, ``eastus-2``), as ``catalog refresh --provider
azure`` writes them from resource_skus: a zonal disk attaches only to VMs of its zone."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure_helpers import StaticToken, options, zonal_offers
from fake_arm import FakeArm

from gpuorch.testing import VolumeContract
from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options

pytestmark = pytest.mark.azure


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
