"""Helpers of the Azure tests (a module of its own: ``conftest`` names clash across test folders)."""

from __future__ import annotations

import time
from typing import Any

from fake_arm import FakeArm

from gpuorch.provider.offer import Offer

REGIONS = ["eastus", "westus2"]


def subnet(arm: FakeArm, region: str) -> str:
    return (f"/subscriptions/{arm.subscription}/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/"
            f"vnet-{region}/subnets/default")


class StaticToken:
    """A TokenCredential that hands out the fake's token (any object with get_token will do)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, int(time.time()) + 3600)


def options(arm: FakeArm, **extra: Any) -> dict[str, Any]:
    return {"subscription_id": arm.subscription, "resource_group": arm.resource_group, "regions": REGIONS,
            "subnet_id": {r: subnet(arm, r) for r in REGIONS}, "endpoint": arm.url,
            "connection_verify": str(arm.ca_file), "poll_interval_s": 0, **extra}


def zonal_offers(zones: tuple[str, ...] = ("1", "2")) -> list[Offer]:
    return [Offer(provider="azure", region="eastus", zone=f"eastus-{z}", instance_type="Standard_NC4as_T4_v3",
                  gpu="T4", gpu_count=1, gpu_memory_gib=16, vcpus=4, memory_gib=28, price_per_hour=0.526,
                  spot_price_per_hour=0.0526, billing_granularity_s=1, min_billing_s=60) for z in zones]
