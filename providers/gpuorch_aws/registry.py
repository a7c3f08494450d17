"""ECR login on an EC2 instance (capability ``registry_login``): the agent runs the AWS CLI's
``ecr get-login-password`` with the instance profile's role (``ecr:GetAuthorizationToken``,
``ecr:BatchGetImage``) and logs its container runtime in as ``AWS``. No key is copied to the
instance; the agent itself knows no registry (``gpuorch.agent.container.RegistryLogin``)."""

from __future__ import annotations

import re

from gpuorch.agent.container import RegistryLogin

# <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]
_ECR = re.compile(r"^\d{12}\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def ecr_login(registry: str) -> RegistryLogin | None:
    """How to log in to ``registry`` when it is an ECR registry (its region named in the host);
    None for any other."""
    m = _ECR.match(registry or "")
    if m is None:
        return None
    return RegistryLogin(registry=registry, username="AWS",
                         token_argv=["aws", "ecr", "get-login-password", "--region", m.group("region")])


class EcrLogin:
    """``AwsProvider``'s ``registry_login`` (the port's method behind the capability of that name)."""

    def registry_login(self, registry: str) -> RegistryLogin | None:
        return ecr_login(registry)
