"""Parsing of the sizes, durations and counts users write in specs and on the command line."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ti?b?|gi?b?|mi?b?)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
# ``1h30m``, ``2h 15m``, ``1m30s``: the form ``duration_text`` prints limits in, read back
_PART = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m|h|d)", re.IGNORECASE)
_DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_size_gib(value: str | int | float) -> float:
    """``16``, ``16GB``, ``16GiB``, ``1.5TB``, ``512MB`` -> GiB. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected a size like 16GB")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("size must not be negative")
        return float(value)
    m = _SIZE.match(str(value))
    if not m:
        raise ValueError(f"cannot read size {value!r}; write it like 16GB, 512MB or 1TB")
    number, unit = float(m.group(1)), (m.group(2) or "g")[0].lower()
    return number * {"t": 1024.0, "g": 1.0, "m": 1 / 1024}[unit]


def parse_duration_s(value: str | int | float) -> float:
    """``90``, ``90s``, ``10m``, ``1.5h``, ``2d``, ``1h30m`` -> seconds. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 10m")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("duration must not be negative; write 0 or more")
        return float(value)
    text = str(value)
    if text.strip().startswith("-"):
        raise ValueError(f"duration {text!r} is negative; write 0s or more")
    m = _DURATION.match(text)
    if m:
        unit = m.group(2).lower() if m.group(2) else None
        return float(m.group(1)) * _DURATION_UNITS[unit]
    return _compound_s(text)


def _compound_s(text: str) -> float:
    """``1h30m`` -> 5400.0: parts each with its unit, largest unit first, none twice."""
    total, pos, last = 0.0, 0, float("inf")
    while pos < len(text.rstrip()):
        m = _PART.match(text, pos)
        unit = _DURATION_UNITS[m.group(2).lower()] if m else None
        if m is None or unit is None or unit >= last:
            raise ValueError(f"cannot read duration {text!r}; write it like 30s, 10m, 2h or 1h30m")
        total, pos, last = total + float(m.group(1)) * unit, m.end(), unit
    if pos == 0:
        raise ValueError(f"cannot read duration {text!r}; write it like 30s, 10m, 2h or 1h30m")
    return total
