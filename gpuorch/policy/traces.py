"""Load spot-availability traces (the only module of the package that reads files).

Format, as published with Can't Be Late: ``{"metadata": {"gap_seconds": 195}, "data": [1, 0,
...]}``, one value per tick, 1 (or more) = spot available, 0 = preempted / no capacity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class TraceError(ValueError):
    """A trace file that cannot be used; the message says which file and why."""


@dataclass(frozen=True)
class Trace:
    """One zone's availability: ``available[tick]`` is True when spot can run that tick."""

    zone: str
    gap_s: int
    available: np.ndarray

    def __len__(self) -> int:
        return int(self.available.shape[0])


def zone_name(path: Path) -> str:
    """``us-east-1a_v100_1.json`` -> ``us-east-1a_v100_1`` (the file stem)."""
    return path.stem


def load_trace(path: str | Path, zone: str | None = None) -> Trace:
    """Read one trace file; ``zone`` defaults to the file stem."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path} is not JSON: {exc.msg}") from exc
    try:
        gap = doc["metadata"]["gap_seconds"]
        data = np.asarray(doc["data"], dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"{path} needs metadata.gap_seconds and a numeric data list") from exc
    if not isinstance(gap, int | float) or gap <= 0 or int(gap) != gap:
        raise TraceError(f"{path}: gap_seconds must be a positive whole number")
    if data.ndim != 1 or data.size == 0:
        raise TraceError(f"{path}: data must be a non-empty list of numbers")
    return Trace(zone or zone_name(path), int(gap), data > 0)


def trace_files(directory: str | Path) -> list[Path]:
    """Every ``*.json`` in ``directory``, sorted by name."""
    return sorted(p for p in Path(directory).glob("*.json") if p.is_file())
