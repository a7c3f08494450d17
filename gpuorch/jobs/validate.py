"""Validation primitives every spec field uses (job specs, sweeps, the API, the daemon config).

Each is a plain function raising ``ValueError`` with the fix, so a pydantic validator can wrap
it and ``jobs.spec._format_error`` prefixes the field. The bounds are what the daemon, the agent
and the providers can act on: a value outside them is refused at submit rather than stored as a
job that waits forever or that the daemon cannot load (issue 16).
"""

from __future__ import annotations

import math
import re
import signal as _signal
from typing import Annotated, Any

from pydantic import BeforeValidator

from gpuorch import bounds

MAX_TEXT = 128 * 1024  # bytes in one env value, run or setup script (ARG_MAX per string is 128 KiB on Linux)
MAX_ENV = 1000  # variables in a job's env
MAX_LIST = 100  # entries in providers / regions
# The numeric bounds are gpuorch.bounds' (one rule for specs, sweeps, the config and the API).
MAX_COUNT, MAX_GPUS, MAX_CPUS, MAX_GIB = bounds.MAX_COUNT, bounds.MAX_GPUS, bounds.MAX_CPUS, bounds.MAX_GIB
MAX_SECONDS, MAX_HOURS, MAX_USD, MAX_NODES = bounds.MAX_SECONDS, bounds.MAX_HOURS, bounds.MAX_USD, bounds.MAX_NODES

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
# The agent catches these; SIGKILL and SIGSTOP cannot be caught, and the job could never save.
UNCATCHABLE = frozenset({"SIGKILL", "SIGSTOP"})


def finite(v: float, *, low: float | None = None, high: float | None = None) -> float:
    """A finite number within bounds (NaN and infinities would be stored as JSON ``null``)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError("expected a number")
    if not math.isfinite(v):
        raise ValueError(f"{v} is not a finite number; write a number")
    if low is not None and v < low:
        raise ValueError(f"must be at least {low:g}")
    if high is not None and v > high:
        raise ValueError(f"must be at most {high:g}")
    return v


def text(v: Any, *, limit: int = MAX_TEXT, what: str = "text") -> str:
    """A string without NUL bytes (no exec accepts them) and at most ``limit`` bytes of UTF-8."""
    if not isinstance(v, str):
        raise ValueError(f"expected {what} as a string")
    if "\0" in v:
        raise ValueError(f"{what} contains a NUL byte; remove it")
    try:
        size = len(v.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None
    if size > limit:
        raise ValueError(f"{what} is {size} bytes; at most {limit} are allowed")
    return v


def nonempty_command(v: Any) -> str:
    """A shell command with something in it (an empty ``run`` would end at once, 'succeeded')."""
    v = text(v, what="the command")
    if not v.strip():
        raise ValueError("empty; give the command to run")
    return v


def env_name(k: Any) -> str:
    if not isinstance(k, str) or not _ENV_NAME.fullmatch(k):
        raise ValueError(f"invalid variable name {k!r}; use letters, digits and _, not starting with a digit")
    if k.startswith("GPUORCH_"):
        raise ValueError(f"{k}: GPUORCH_* variables are set by gpuorch; rename yours")
    return k


def env_value(v: Any) -> str:
    """A scalar as its text; ``null``, lists and mappings are refused (``None`` would become
    the string ``"None"``). Booleans are written as YAML writes them (``true``)."""
    if v is None:
        raise ValueError("null is not a value; quote it (\"\") or remove the variable")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        finite(v)
    if not isinstance(v, str | int | float):
        raise ValueError("expected a string or a number; quote the value")
    return text(str(v), what="the value")


def signal_name(v: Any) -> str:
    """A catchable signal, as ``SIGNAME``."""
    if not isinstance(v, str):
        raise ValueError("write a signal name like SIGUSR1 or SIGTERM")
    name = v.strip().upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    if not isinstance(getattr(_signal.Signals, name, None), _signal.Signals) or name.startswith("SIG_"):
        raise ValueError(f"unknown signal {v!r}; use a name like SIGUSR1 or SIGTERM")
    if name in UNCATCHABLE:
        raise ValueError(f"{name} cannot be caught, so the job could not save; use SIGUSR1 or SIGTERM")
    return name


def relative_dir(v: Any) -> str:
    """A path relative to the job's run directory that stays inside it."""
    v = text(v, limit=4096, what="the path")
    parts = v.replace("\\", "/").split("/")
    if not v.strip() or v.startswith(("/", "~")) or ".." in parts:
        raise ValueError(f"{v!r} must be a relative path inside the job's directory (no leading / or ~, no ..)")
    return v


def store_url(v: Any) -> str:
    """A checkpoint store URL with somewhere to write: ``file:///path``, or a bucket (and for
    ``az://``, an account) for the object stores. The store checks its own form at open."""
    from gpuorch.checkpoint.url import StoreUrl

    v = text(v, limit=4096, what="the URL")
    u = StoreUrl.parse(v)  # ValueError naming the form
    if u.scheme == "file":  # file://~/path: under the daemon user's home (gpuorch.checkpoint.filestore)
        if u.host not in ("", "localhost", "~") or not u.path.strip("/"):
            raise ValueError(f"{v!r} names no directory; write file:///abs/path or file://~/path")
    elif not u.bucket or not u.bucket.strip():
        raise ValueError(f"{v!r} names no bucket; write {u.scheme}://bucket/prefix")
    return v


def bounded_list(v: Any, *, limit: int = MAX_LIST) -> Any:
    if isinstance(v, list) and len(v) > limit:
        raise ValueError(f"{len(v)} entries; at most {limit} are allowed")
    return v


def short_names(v: Any) -> Any:
    """A list of provider or region names: bounded, each a short non-empty string."""
    v = bounded_list(v)
    if isinstance(v, list):
        for item in v:
            if not isinstance(item, str) or not item.strip() or len(item) > 100 or "\0" in item:
                raise ValueError(f"{item!r} is not a name; write names like aws or us-east-1")
    return v


# Annotated types the spec's fields use.
EnvName = Annotated[str, BeforeValidator(env_name)]
EnvValue = Annotated[str, BeforeValidator(env_value)]
NameList = Annotated[list[str], BeforeValidator(short_names)]
