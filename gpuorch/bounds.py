"""The one rule for every number a user gives gpuorch: finite, a number (not true/false), and
within a documented range (docs/operations.md, "Limits").

Job specs, sweeps, the daemon configuration, the HTTP API's request bodies and the numeric
command-line options all take their numbers through the types and checks here. Why each part:

- NaN and infinities are stored as JSON ``null`` or SQL ``NULL``: a NaN budget came back as
  "no cap" (issue 31), an infinite interval as a spec the daemon cannot load.
- An integer past 2**63 cannot be stored in SQLite or PostgreSQL (``max_parallel: 1e20`` was
  an "internal error"), and a value far past any sane one is a typo, not a wish.
- ``true`` is not 1: pydantic's lax mode would read ``max_cost: true`` as one dollar.

Pure; pydantic and the standard library only (a leaf: every layer may use it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from gpuorch.errors import UserInputError

MAX_USD = 1e9  # any budget, cap or price, in USD
DAY_S = 86400.0
YEAR_S = 366 * DAY_S
MAX_SECONDS = 10 * YEAR_S  # a job's intervals, startup and deadline; a sweep's deadline
MAX_HOURS = MAX_SECONDS / 3600
MAX_COUNT = 1_000_000  # retries, kept checkpoints and other counts
MAX_TRIALS = 10_000  # trials in one sweep, and so its max_parallel
MAX_STEPS = 10**12  # training steps (a sweep's objective and pruning)
MAX_NODES = 1024  # instances one job spans
MAX_INT64 = 2**63 - 1  # what an SQL BIGINT holds: seeds and ids
MAX_CPUS = 4096
MAX_GPUS = 64  # per job; no instance has more
MAX_GIB = 1024.0**2  # 1 PiB: memory, disk, volume size


def not_bool(v: Any) -> Any:
    """Refuse ``true``/``false`` where a number is meant (pydantic would read them as 1 and 0)."""
    if isinstance(v, bool):
        raise ValueError("expected a number, not true/false; write the number")
    return v


def whole(v: Any) -> Any:
    """``not_bool``, and a whole float (``1e20`` in JSON) as the int it is, so a range check
    names the bound rather than pydantic's "exceeded maximum size"."""
    v = not_bool(v)
    return int(v) if isinstance(v, float) and v.is_integer() else v


# A field combines one of these with its own ``Field(ge=..., le=...)``; a model's
# ``allow_inf_nan=False`` (or the types below) refuses NaN and the infinities.
Number = Annotated[float, BeforeValidator(not_bool), Field(allow_inf_nan=False)]
Integer = Annotated[int, BeforeValidator(whole)]

Usd = Annotated[Number, Field(gt=0, le=MAX_USD)]  # a budget, a cap, a price per hour
Count = Annotated[Integer, Field(ge=0, le=MAX_COUNT)]
Seed = Annotated[Integer, Field(ge=-MAX_INT64, le=MAX_INT64)]


# The fix for each pydantic error a field's type or bounds raise, as one clause: {gt} and the like
# are the bound, as ``fix_hint``'s ``shown`` writes it.
_FIX_HINTS = {
    "extra_forbidden": "unknown key; remove it or check its spelling",
    "missing": "required; add it",
    "greater_than": "must be greater than {gt}; raise it",
    "greater_than_equal": "must be at least {ge}; raise it",
    "less_than": "must be less than {lt}; lower it",
    "less_than_equal": "must be at most {le}; lower it",
    "finite_number": "must be a finite number (not NaN or infinite); write a number",
    "int_from_float": "must be a whole number; write it without a fraction",
    "int_parsing_size": "too large a number; write a smaller one",
    "int_parsing": "must be a whole number; write it like 4",
    "float_parsing": "must be a number; write it like 2.5",
}


def fix_hint(err: Mapping[str, Any], shown: Callable[[Any], str] | None = None) -> str | None:
    """What is wrong with a field and the fix, for a pydantic error of the kinds above ("must be
    greater than 0; raise it"), its bounds as ``shown`` writes them (default ``describe_bound``);
    None for another kind (its own message says it)."""
    hint = _FIX_HINTS.get(str(err["type"]))
    show = shown or describe_bound
    return hint.format(**{k: show(b) for k, b in (err.get("ctx") or {}).items()}) if hint else None


def describe_bound(v: Any) -> str:
    """A bound as a person reads it: 1000000000, not 1000000000.0 or 1e+09."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return f"{v:g}" if isinstance(v, float) else str(v)


def too_far(written: Any, when: datetime, now: datetime) -> bool:
    """Whether a deadline written as a duration (``8h``, not ``2030-01-01T00:00Z``) lies more than
    ``MAX_SECONDS`` ahead: a typo, like ``80000h``. A time written out is taken as meant."""
    text = str(written)
    return "-" not in text and ":" not in text and (when - now).total_seconds() > MAX_SECONDS


def usd(value: Any, option: str) -> float:
    """A budget given on the command line or in a request (text or a number) as a finite positive
    USD amount at most ``MAX_USD``; else UserInputError naming ``option`` and the fix."""
    fix = f"give a positive amount in USD, at most {describe_bound(MAX_USD)}, like 12.50"
    if isinstance(value, bool):
        raise UserInputError(f"{option}: true/false is not an amount; {fix}")
    if isinstance(value, str):
        text = value.strip().removeprefix("$")
        try:
            number = float(text)
        except ValueError:
            raise UserInputError(f"{option}: {value[:40]!r} is not a number; {fix}") from None
    elif isinstance(value, int | float):
        number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
    else:
        raise UserInputError(f"{option}: not a number; {fix}")
    if not math.isfinite(number):
        raise UserInputError(f"{option}: {str(value)[:40]} is not a finite amount; {fix}")
    amount = f"${number:.2f}" if abs(number) < 1e12 else describe_bound(number)
    if number <= 0:
        raise UserInputError(f"{option}: {amount} is not a budget; {fix}")
    if number > MAX_USD:
        raise UserInputError(f"{option}: {amount} is over the limit; {fix}")
    return number
