"""The RunPod provider's options (``providers.runpod`` in the daemon config), validated statically,
and where the API key comes from.

The key is never an option (it would land in a config file the daemon logs and copies): it is
read from ``RUNPOD_API_KEY``, else from the runpod CLI's credentials file ``~/.runpod/config.toml``
(``[default] api_key = "..."``, written by ``runpod config``; runpod/cli/groups/config/functions.py),
each time the provider is built, and kept in memory only.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import ErrorDetails

from gpuorch.errors import UserInputError
from gpuorch.provider.options import validate_options
from gpuorch.provider.registry_creds import RegistrySecret, check_hosts

Cloud = Literal["secure", "community"]

KEY_ENV = "RUNPOD_API_KEY"
BASE_URL_ENV = "RUNPOD_API_BASE_URL"  # the official client's variable (runpod/api/graphql.py)
CREDENTIALS = Path("~/.runpod/config.toml")
_DATA_CENTER = re.compile(r"[A-Z]{2}(-[A-Z0-9]{1,8}){1,3}")  # US-KS-2, EU-RO-1, EUR-IS-1
_PROFILE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# RunPod's PyTorch image: Ubuntu with python3 and openssh-server, what the agent and sshd need.
DEFAULT_IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


def _all_clouds() -> list[Cloud]:
    return ["secure", "community"]


class RunpodOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    clouds: list[Cloud] = Field(default_factory=_all_clouds, min_length=1)
    data_center: str | None = None  # pin pods to one data center (network volumes live in one)
    # Where a job's network volume is created (default: data_center); its pods then deploy there.
    volume_data_center: str | None = None
    image: str = DEFAULT_IMAGE
    ssh_user: str = "root"
    api_url: str | None = None  # default: $RUNPOD_API_BASE_URL, else https://api.runpod.io
    profile: str = "default"  # the section of ~/.runpod/config.toml
    max_attempts: int = Field(default=5, ge=1, le=20)
    retry_max_s: float = Field(default=60.0, gt=0, le=3600)
    offers_ttl_s: float = Field(default=600.0, ge=0, le=86400)
    # Private images (provider/registry_creds.py): registry host -> user name and the env variable holding the
    # password or token; other hosts' logins are read from docker's config.json (docker_config, else
    # $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
    registries: dict[str, RegistrySecret] = Field(default_factory=dict)
    docker_config: str | None = None

    @field_validator("registries")
    @classmethod
    def _registries(cls, v: dict[str, RegistrySecret]) -> dict[str, RegistrySecret]:
        return check_hosts(v)

    @field_validator("clouds")
    @classmethod
    def _clouds(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("lists a cloud twice")
        return v

    @field_validator("data_center", "volume_data_center")
    @classmethod
    def _data_center(cls, v: str | None) -> str | None:
        if v is not None and not _DATA_CENTER.fullmatch(v):
            raise ValueError(f"{v!r} is not a RunPod data center id (like US-KS-2)")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        from gpuorch.agent.container import parse_image

        parse_image(v)  # ValueError saying what is wrong
        return v

    @field_validator("ssh_user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", v):
            raise ValueError(f"{v!r} is not a login name (like root)")
        return v

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        if not _PROFILE.fullmatch(v):
            raise ValueError(f"{v!r} is not a profile name of ~/.runpod/config.toml (like default)")
        return v

    @field_validator("api_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else check_url(v)

    def base_url(self) -> str:
        from .api import DEFAULT_BASE_URL

        return self.api_url or check_url(os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL, BASE_URL_ENV)


def check_url(v: str, where: str = "") -> str:
    """https, or http to this host only: the API key travels in every request."""
    parts = urlsplit(v)
    ok = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    if not ok or not parts.hostname or parts.query or parts.fragment:
        msg = f"{v!r} is not an https:// URL (http:// only to 127.0.0.1: the API key travels in each request)"
        raise ValueError(f"{where}: {msg}" if where else msg)
    return v


def parse_options(options: dict[str, Any] | None) -> RunpodOptions:
    """Validate ``providers.runpod``; UserInputError naming the option and the fix."""
    return validate_options(RunpodOptions, options, "runpod", explain=_explain)


def _explain(err: ErrorDetails, where: str) -> str | None:
    if err["type"] == "literal_error":
        return f"{err['input']!r} is not a RunPod cloud; use secure or community"
    return None


def api_key(profile: str = "default", env: dict[str, str] | None = None, home: Path | None = None) -> tuple[str, str]:
    """(key, where it came from: ``$RUNPOD_API_KEY`` or the file); UserInputError if none."""
    env = dict(os.environ) if env is None else env
    if env.get(KEY_ENV, "").strip():
        return env[KEY_ENV].strip(), f"${KEY_ENV}"
    path = (home / ".runpod" / "config.toml") if home is not None else CREDENTIALS.expanduser()
    fix = f"export {KEY_ENV}=... or run `runpod config` (writes {CREDENTIALS})"
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise UserInputError(f"providers.runpod: no API key: {KEY_ENV} is not set and {path} does not exist; "
                             f"{fix}") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserInputError(f"providers.runpod: cannot read {path} ({type(e).__name__}); {fix}") from None
    section = doc.get(profile)
    key = section.get("api_key") if isinstance(section, dict) else None
    if not isinstance(key, str) or not key.strip():
        raise UserInputError(f"providers.runpod: {path} has no api_key in [{profile}]; {fix}")
    return key.strip(), str(path)
