"""Job metrics: JSON lines a job appends to ``$GPUORCH_METRICS_FILE``; the daemon keeps the latest
value of each metric on the job (``Job.metrics``).

Each line is one JSON object, e.g. ``{"step": 200, "loss": 0.41}``. Lines that are not JSON
objects are skipped; values that are not numbers, booleans or short strings are dropped.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_METRICS = 64  # distinct names kept per job
MAX_TEXT = 200  # characters of a string value


def _value(v: Any) -> Any:
    if isinstance(v, bool) or (isinstance(v, int | float) and math.isfinite(v)):
        return v
    if isinstance(v, str) and len(v) <= MAX_TEXT:
        return v
    return None


def merge_lines(current: dict[str, Any], data: bytes) -> dict[str, Any] | None:
    """``current`` updated with every line of ``data`` in order; None if nothing changed."""
    merged = dict(current)
    for line in data.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        for k, v in obj.items():
            v = _value(v)
            if v is not None and (k in merged or len(merged) < MAX_METRICS):
                merged[str(k)] = v
    return merged if merged != current else None


def steps_of(data: bytes, metric: str) -> list[tuple[int, float]]:
    """The (step, value) pairs of ``metric`` in ``data``: each line with a numeric ``step`` and a
    numeric value of ``metric`` (what the sweep's pruning rule reads)."""
    out: list[tuple[int, float]] = []
    for line in data.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        step, v = obj.get("step"), _value(obj.get(metric))
        if isinstance(step, int | float) and not isinstance(step, bool) and math.isfinite(step) \
                and isinstance(v, int | float) and not isinstance(v, bool):
            out.append((int(step), float(v)))
    return out
