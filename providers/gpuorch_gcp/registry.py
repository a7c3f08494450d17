"""Artifact Registry and Container Registry login on a GCE VM (capability ``registry_login``):
the agent runs ``gcloud auth print-access-token``, which answers with the VM's service account
(``roles/artifactregistry.reader``), and logs its container runtime in as
``oauth2accesstoken``. No key is copied to the VM; the agent itself knows no registry
(``gpuorch.agent.container.RegistryLogin``)."""

from __future__ import annotations

import re

from gpuorch.agent.container import RegistryLogin

# <location>-docker.pkg.dev (Artifact Registry); gcr.io and its regional hosts (Container Registry).
_GAR = re.compile(r"^(?:[a-z0-9-]+-docker\.pkg\.dev|(?:[a-z]+\.)?gcr\.io)$")


def gar_login(registry: str) -> RegistryLogin | None:
    """How to log in to ``registry`` when it is Google's; None for any other."""
    if not _GAR.match(registry or ""):
        return None
    return RegistryLogin(registry=registry, username="oauth2accesstoken",
                         token_argv=["gcloud", "auth", "print-access-token"])


class GarLogin:
    """``GcpProvider``'s ``registry_login`` (the port's method behind the capability of that name)."""

    def registry_login(self, registry: str) -> RegistryLogin | None:
        return gar_login(registry)
