"""The Vast provider's options (``providers.vast`` in the daemon config), validated statically.

The API key is never an option: it comes from ``VAST_API_KEY`` or vastai's own key file
(``credentials.py``), so it never reaches the daemon's config, database or logs.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import ErrorDetails

from gpuorch.provider.options import validate_options
from gpuorch.provider.registry_creds import RegistrySecret, check_hosts

from .catalog import CPU_PER_GPU, RAM_GIB_PER_GPU

COUNTRY = re.compile(r"[A-Z]{2}")
# Vast's own default image (docs.vast.ai/api-reference/instances/create-instance): Ubuntu with
# Python 3, CUDA and an sshd that Vast's ``ssh`` launch mode starts. The agent needs only python3.
DEFAULT_IMAGE = "vastai/base-image:@vastai-automatic-tag"
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def _number(default: float, lo: float, hi: float) -> Any:
    return Field(default=default, ge=lo, le=hi, allow_inf_nan=False, strict=True)


class VastOptions(BaseModel):
    """``providers.vast`` options (docs/vast.md, "Configuration")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server_url: str | None = None  # tests and proxies: the API's base URL (default: Vast's, https://console.vast.ai)
    regions: list[str] = Field(default_factory=list)  # ISO country codes of hosts to rent; empty: any
    # Hosts below this reliability score (Vast's ``reliability2``, 0..1) are never offered; the
    # others are ranked by their expected price, price / reliability (market.py).
    min_reliability: float = _number(0.95, 0.0, 1.0)
    verified_only: bool = Field(default=True, strict=True)  # Vast-verified hosts only (search's default)
    # An interruptible bid is the ask's minimum bid times this: a little above the floor, so the
    # first higher bidder does not pause the job at once.
    bid_factor: float = _number(1.2, 1.0, 10.0)
    # A launch takes a live ask of the offer's class costing up to this fraction more than the
    # offer said (the market moves between the search and the launch); else NoCapacityError.
    price_tolerance: float = _number(0.10, 0.0, 1.0)
    offers_ttl_s: float = _number(60.0, 1.0, 3600.0)  # the marketplace changes by the minute: cache briefly
    min_cpu_per_gpu: float = _number(CPU_PER_GPU, 0.0, 256.0)  # search floors: a smaller host is never rented
    min_ram_gib_per_gpu: float = _number(RAM_GIB_PER_GPU, 0.0, 4096.0)
    image: str = DEFAULT_IMAGE  # the container the agent runs in (needs python3 and sshd)
    ssh_user: str = "root"
    max_attempts: int = Field(default=5, ge=1, le=20, strict=True)  # per API call, 429 and 5xx included
    retry_max_s: float = _number(60.0, 0.001, 3600.0)
    # Private images (provider/registry_creds.py): registry host -> user name and the env variable holding the
    # password or token; other hosts' logins are read from docker's config.json (docker_config, else
    # $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
    registries: dict[str, RegistrySecret] = Field(default_factory=dict)
    docker_config: str | None = None

    @field_validator("registries")
    @classmethod
    def _registries(cls, v: dict[str, RegistrySecret]) -> dict[str, RegistrySecret]:
        return check_hosts(v)

    @field_validator("server_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"{v!r} is not an http(s) base URL like https://console.vast.ai")
        return v.rstrip("/")

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for r in v:
            if not COUNTRY.fullmatch(r):
                raise ValueError(f"{r!r} is not a two-letter country code like US or SE")
        if len(set(v)) != len(v):
            raise ValueError("lists a country twice")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if not _IMAGE.fullmatch(v):
            raise ValueError(f"{v!r} is not a container image reference like vastai/base-image:latest")
        return v

    @field_validator("ssh_user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", v):
            raise ValueError(f"{v!r} is not a user name like root")
        return v


def parse_options(options: dict[str, Any] | None) -> VastOptions:
    """Validate ``providers.vast``; raise UserInputError naming the option and the fix."""
    return validate_options(VastOptions, options, "vast", explain=_explain)


def _explain(err: ErrorDetails, where: str) -> str | None:
    if err["type"] == "extra_forbidden" and "key" in where:
        return "the API key is never a config option; set VAST_API_KEY or run `vastai set api-key`"
    return None
