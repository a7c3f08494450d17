"""Azure Container Registry login on an Azure VM (capability ``registry_login``): the agent runs
``az acr login --expose-token`` with the VM's managed identity (``AcrPull``) and logs its
container runtime in with the token ACR gives (its fixed user name). No key is copied to the VM;
the agent itself knows no registry (``gpuorch.agent.container.RegistryLogin``)."""

from __future__ import annotations

import re

from gpuorch.agent.container import RegistryLogin

_ACR = re.compile(r"^(?P<name>[a-zA-Z0-9]+)\.azurecr\.io$")
ACR_TOKEN_USER = "00000000-0000-0000-0000-000000000000"  # what ACR expects with an exposed token


def acr_login(registry: str) -> RegistryLogin | None:
    """How to log in to ``registry`` when it is an ACR registry (``<name>.azurecr.io``); None
    for any other."""
    m = _ACR.match(registry or "")
    if m is None:
        return None
    return RegistryLogin(registry=registry, username=ACR_TOKEN_USER,
                         token_argv=["az", "acr", "login", "--name", m.group("name"), "--expose-token",
                                     "--output", "tsv", "--query", "accessToken"])


class AcrLogin:
    """``AzureProvider``'s ``registry_login`` (the port's method behind the capability of that name)."""

    def registry_login(self, registry: str) -> RegistryLogin | None:
        return acr_login(registry)
