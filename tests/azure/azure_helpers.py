"""Helpers of the Azure tests (a module of its own: ``conftest`` names clash across test folders)."""

from __future__ import annotations

import time
from typing import Any

from fake_arm import FakeArm

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
