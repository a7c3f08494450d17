"""Vast's ``image_login``: the docker login arguments a private image's credentials
(``gpuorch.provider.registry_creds``) travel in."""

from __future__ import annotations

import re

from gpuorch.errors import PermanentError
from gpuorch.provider.registry_creds import Credential

# What Vast's ``image_login`` (docker login arguments, split on spaces by the host) can carry safely.
_LOGIN_WORD = re.compile(r"[A-Za-z0-9._@+/=:~-]{1,4096}")


def docker_login_args(cred: Credential, provider: str) -> str:
    """``-u USER -p PASSWORD HOST``, as ``vastai create instance --login`` passes it
    (docs.vast.ai/cli/reference/create-instance); PermanentError for a value that a space-split
    argument string cannot carry as it is (spaces, quotes, shell characters)."""
    for what, value in (("user name", cred.username), ("password", cred.password)):
        if not _LOGIN_WORD.fullmatch(value):
            raise PermanentError(f"the {cred.host} {what} has characters a docker login argument cannot carry "
                                 f"(spaces, quotes, shell characters); use an access token of letters and digits "
                                 f"in providers.{provider}.registries.{cred.host}", code="RegistryAuth.Unsafe")
    return f"-u {cred.username} -p {cred.password} {cred.host}"
