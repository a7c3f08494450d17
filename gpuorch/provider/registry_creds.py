"""A private image's registry credentials, from the standard chain: the adapter kit's, for the markets
that pull the job's image at launch with credentials given in the launch call (RunPod, Vast).

For the registry of the job's image (``docker.io`` for a Docker Hub name):

1. ``providers.<name>.registries.<host>``: ``{username, password_env}``, the password or token read
   from that environment variable of the daemon. Declared private: an unset variable fails the
   launch in one line naming the variable (rather than a pod that never pulls).
2. Docker's ``config.json`` (``providers.<name>.docker_config``, else ``$DOCKER_CONFIG/config.json``,
   else ``~/.docker/config.json``), as ``docker login`` writes it: ``auths.<host>.auth`` (base64 of
   ``user:password``) or ``username``/``password``. A login kept by a credential helper
   (``credsStore``, ``credHelpers``) is not run here: the launch fails naming option 1.
3. Else none: the image is pulled anonymously (a public image).

Read at each launch; the secret stays in memory and is never logged, stored or put in the job's env.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from gpuorch.agent.container import parse_image
from gpuorch.errors import PermanentError
from gpuorch.provider import Finding

DOCKER_HUB = "docker.io"
_HUB_KEYS = ("https://index.docker.io/v1/", "https://index.docker.io/v1", "index.docker.io", "docker.io",
             "registry-1.docker.io")
HOST = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?")
_ENV = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
_USER = re.compile(r"[^\s'\"\\]{1,255}")


@dataclass(frozen=True)
class Credential:
    host: str
    username: str
    password: str = field(repr=False)


class RegistrySecret(BaseModel):
    """``registries.<host>``: the user name, and the environment variable holding the password."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str
    password_env: str

    @field_validator("username")
    @classmethod
    def _user(cls, v: str) -> str:
        if not _USER.fullmatch(v):
            raise ValueError(f"{v!r} is not a registry user name (no spaces or quotes)")
        return v

    @field_validator("password_env")
    @classmethod
    def _env(cls, v: str) -> str:
        if not _ENV.fullmatch(v):
            raise ValueError(f"{v!r} is not an environment variable name like GHCR_TOKEN")
        return v


def check_hosts(v: dict[str, Any]) -> dict[str, Any]:
    """The ``registries`` option's keys: registry hosts as image references name them."""
    for host in v:
        if not HOST.fullmatch(host):
            raise ValueError(f"{host!r} is not a registry host like ghcr.io or docker.io")
    return v


def registry_of(image: str | None) -> str | None:
    """The registry host of ``image`` (``docker.io`` for a Docker Hub name); None if unparseable."""
    if not image:
        return None
    try:
        return parse_image(image).registry or DOCKER_HUB
    except ValueError:
        return None


def credential_for(image: str | None, provider: str, registries: Mapping[str, RegistrySecret],
                   docker_config: str | None = None, env: Mapping[str, str] | None = None) -> Credential | None:
    """The credentials to pull ``image`` with (see the module docstring); PermanentError, one line
    naming the fix, where the chain says there are some but they cannot be read."""
    host = registry_of(image)
    if host is None:
        return None
    env = os.environ if env is None else env
    declared = registries.get(host)
    if declared is not None:
        secret = (env.get(declared.password_env) or "").strip()
        if not secret:
            raise PermanentError(f"image {image} needs the {host} login of providers.{provider}.registries.{host}, "
                                 f"but ${declared.password_env} is not set; export the registry's password or "
                                 f"token as {declared.password_env} for the daemon", code="RegistryAuth.Missing")
        return Credential(host, declared.username, secret)
    return _from_docker_config(host, _config_path(docker_config, env), provider)


def registry_findings(provider: str, registries: Mapping[str, RegistrySecret],
                      env: Mapping[str, str] | None = None) -> list[Finding]:
    """``doctor``: each declared registry, and whether its secret's variable is set (never its value)."""
    env = os.environ if env is None else env
    check = f"provider {provider} registries"
    return [Finding.ok(check, f"{host}: user {r.username}, password from ${r.password_env}")
            if (env.get(r.password_env) or "").strip() else
            Finding.fail(check, f"{host}: ${r.password_env} is not set",
                         f"export the {host} password or token as {r.password_env} for the daemon")
            for host, r in sorted(registries.items())]


def _config_path(option: str | None, env: Mapping[str, str]) -> Path:
    if option:
        return Path(option).expanduser()
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]).expanduser() / "config.json"
    return Path(env.get("HOME") or Path.home()) / ".docker" / "config.json"


def _from_docker_config(host: str, path: Path, provider: str) -> Credential | None:
    fix = f"run docker login {host} again, or set providers.{provider}.registries.{host}"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise PermanentError(f"cannot read docker's {path} ({type(e).__name__}); {fix}",
                             code="RegistryAuth.Config") from None
    auths = data.get("auths") if isinstance(data, dict) else None
    auths = auths if isinstance(auths, dict) else {}
    keys = _HUB_KEYS if host == DOCKER_HUB else (host, f"https://{host}", f"https://{host}/v1/", f"http://{host}")
    entry = next((auths[k] for k in keys if isinstance(auths.get(k), dict)), None)
    helpers = data.get("credHelpers") if isinstance(data, dict) else None
    if entry is None or not (entry.get("auth") or entry.get("password")):
        if (isinstance(helpers, dict) and host in helpers) or (entry is not None and data.get("credsStore")):
            raise PermanentError(f"docker keeps the {host} login in a credential helper ({path}), which gpuorch does "
                                 f"not run; set providers.{provider}.registries.{host} (username, password_env)",
                                 code="RegistryAuth.Helper")
        return None
    user, password = entry.get("username"), entry.get("password")
    if entry.get("auth"):
        try:
            user, _, password = base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise PermanentError(f"docker's {path}: auths.{host}.auth is not base64 of user:password; {fix}",
                                 code="RegistryAuth.Config") from None
    if not isinstance(user, str) or not isinstance(password, str) or not user or not password:
        raise PermanentError(f"docker's {path}: the {host} login has no user name or password; {fix}",
                             code="RegistryAuth.Config")
    return Credential(host, user, password)
