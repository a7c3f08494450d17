"""``providers.ssh``: the pool's hosts and how to reach, trust and price them (docs/ssh-pools.md).

Validated by rule: every problem is one ``UserInputError`` line naming
``providers.ssh.<field>`` (``hosts[i].<field>`` for a host) and the fix, and nothing is built.
"""

from __future__ import annotations

import getpass
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from gpuorch.errors import UserInputError
from gpuorch.provider import gpus, parse_public_key
from gpuorch.provider.options import fix_hint

PROVIDER = "ssh"
MAX_PRICE = 10_000.0  # USD per GPU-hour: far above any GPU's rental price
MAX_GPUS = 64  # per host
_USER = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_ADDRESS = re.compile(rf"(?:(?P<user>{_USER})@)?(?:(?P<name>{_HOSTNAME})|\[(?P<v6>[0-9A-Fa-f:.]{{2,45}})\])"
                      r"(?::(?P<port>[0-9]{1,5}))?")
_ZONE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}")
_GPUS = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9 _.-]{0,40})(?::(?P<mem>[0-9]{1,4}(?:\.[0-9]+)?)GB)?"
                   r"(?::(?P<count>[0-9]{1,3}))?", re.IGNORECASE)
_FIX = {
    "host": "write user@host:port (port 1-65535, default 22)",
    "proxy_jump": "write user@host:port of the jump host, or leave it out",
    "key": "give the path of the private key gpuorch logs in with",
    "host_key": "give the host's public key as 'ssh-ed25519 AAAA...' (from its console, not a scan), or leave it "
                "out to use known_hosts",
    "gpus": "write NAME[:MEMORY]:COUNT like A100:80GB:4, or leave it out to detect them with nvidia-smi",
    "name": "use letters, digits and . _ : - (at most 63)",
    "price_per_gpu_hour": f"give a number of USD from 0 to {MAX_PRICE:g}",
}


def _number(v: Any) -> Any:
    """Numbers only: YAML's true/false or a string is not a price or a duration."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("must be a number")
    if not math.isfinite(float(v)):
        raise ValueError("must be a finite number")
    return v


Number = Annotated[float, BeforeValidator(_number)]


@dataclass(frozen=True)
class Address:
    user: str
    host: str
    port: int

    @property
    def key(self) -> str:
        """The host's identity in the slot ledger: the same for every daemon and login."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.user}@{self.key}"


def parse_address(text: str) -> Address:
    m = _ADDRESS.fullmatch(text.strip()) if isinstance(text, str) else None
    port = int(m["port"]) if m and m["port"] else 22
    if m is None or not 1 <= port <= 65535:
        raise ValueError(f"{str(text)[:80]!r} is not user@host:port")
    return Address(m["user"] or getpass.getuser(), m["name"] or m["v6"], port)


@dataclass(frozen=True)
class GpuGroup:
    """GPUs of one model on a host, by index (their slot numbers; ``CUDA_VISIBLE_DEVICES``)."""

    gpu: str
    memory_gib: float
    indexes: tuple[int, ...]


def parse_gpus(text: str) -> GpuGroup:
    m = _GPUS.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"cannot read {str(text)[:60]!r}")
    memory = float(m["mem"]) if m["mem"] else None
    spec = gpus.variant_for(m["name"], memory)
    if spec is None:
        raise ValueError(f"{m['name']!r}{f' with {memory:g} GB' if memory else ''} is not a GPU gpuorch knows")
    count = int(m["count"] or 1)
    if not 1 <= count <= MAX_GPUS:
        raise ValueError(f"count {count} is out of range 1-{MAX_GPUS}")
    return GpuGroup(spec.name, spec.memory_gib, tuple(range(count)))


class HostOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str
    key: Path
    proxy_jump: str | None = None
    host_key: str | list[str] | None = None
    name: str | None = None
    gpus: str | None = None
    price_per_gpu_hour: Number | None = Field(default=None, ge=0, le=MAX_PRICE)
    remote_root: str | None = None
    python: str | None = Field(default=None, min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]+$")

    @field_validator("host", "proxy_jump")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None:
            parse_address(v)
        return v

    @field_validator("host_key")
    @classmethod
    def _host_key(cls, v: str | list[str] | None) -> list[str] | None:
        if v is None:
            return None
        keys = [v] if isinstance(v, str) else v
        if not keys:
            raise ValueError("is empty")
        return [" ".join(parse_public_key(k)) for k in keys]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _ZONE.fullmatch(v):
            raise ValueError(f"{v[:70]!r} is not a host name")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: str | None) -> str | None:
        if v is not None:
            parse_gpus(v)
        return v

    @field_validator("remote_root")
    @classmethod
    def _root(cls, v: str | None) -> str | None:
        return _remote_root(v)


def _remote_root(v: str | None) -> str | None:
    if v is not None and (not (v.startswith("/") or v.startswith("~/")) or len(v) > 1024
                          or any(ord(c) < 32 for c in v) or "/../" in f"{v}/"):
        raise ValueError(f"{v[:70]!r} must be an absolute path or start with ~/ (no ..)")
    return v


class PoolOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hosts: list[HostOptions] = Field(min_length=1, max_length=1000)
    region: str = Field(default="pool", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    price_per_gpu_hour: Number = Field(default=0.0, ge=0, le=MAX_PRICE)
    known_hosts: Path = Path("~/.ssh/known_hosts")
    remote_root: str = "~/.gpuorch-pool"
    python: str = Field(default="python3", min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]+$")
    check_interval_s: Number = Field(default=15.0, ge=0.05, le=3600)
    silent_after_s: Number = Field(default=90.0, ge=0.1, le=86400)
    connect_timeout_s: Number = Field(default=5.0, ge=0.1, le=120)
    stop_grace_s: Number = Field(default=30.0, ge=0, le=3600)

    @field_validator("remote_root")
    @classmethod
    def _root(cls, v: str) -> str:
        return _remote_root(v) or v


@dataclass(frozen=True)
class Host:
    """One host of the pool, resolved from its options."""

    index: int
    address: Address
    key_path: Path
    proxy_jump: Address | None
    host_keys: tuple[str, ...]  # configured; () = from known_hosts
    zone: str
    gpus: GpuGroup | None  # declared; None = detect
    price_per_gpu_hour: float
    remote_root: str
    python: str

    @property
    def field(self) -> str:
        return f"providers.{PROVIDER}.hosts[{self.index}]"


def parse_options(options: dict[str, Any]) -> tuple[PoolOptions, list[Host]]:
    """The validated options and their hosts; UserInputError (one line) for anything wrong."""
    try:
        opts = PoolOptions.model_validate(options or {})
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(x) for x in err["loc"] if not str(x).startswith(("function-", "list[", "str"))]
        where = "".join(f"[{x}]" if x.isdigit() else f".{x}" for x in loc).lstrip(".")
        fix = _FIX.get(loc[-1] if loc else "", "see docs/ssh-pools.md for the options")
        msg = fix_hint(err) or f"{str(err['msg']).removeprefix('Value error, ')}; {fix}"
        raise UserInputError(f"providers.{PROVIDER}.{where or 'hosts'}: {msg}") from None
    hosts: list[Host] = []
    seen: dict[tuple[str, str], int] = {}
    for i, h in enumerate(opts.hosts):
        address = parse_address(h.host)
        zone = h.name or address.key
        for what, key in (("host", address.key), ("name", zone)):
            if (what, key) in seen:
                raise UserInputError(f"providers.{PROVIDER}.hosts[{i}].{what}: {key} repeats "
                                     f"hosts[{seen[(what, key)]}]; list each host once")
            seen[(what, key)] = i
        hosts.append(Host(
            index=i, address=address, key_path=h.key.expanduser(),
            proxy_jump=parse_address(h.proxy_jump) if h.proxy_jump else None,
            host_keys=tuple(h.host_key or ()), zone=zone,
            gpus=parse_gpus(h.gpus) if h.gpus else None,
            price_per_gpu_hour=float(opts.price_per_gpu_hour if h.price_per_gpu_hour is None else h.price_per_gpu_hour),
            remote_root=(h.remote_root or opts.remote_root).rstrip("/"), python=h.python or opts.python,
        ))
    return opts, hosts
