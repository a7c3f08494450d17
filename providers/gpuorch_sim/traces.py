"""Spot availability traces and spot price series, as published with "Can't Be Late" (NSDI '24).

Availability: ``{"metadata": {"gap_seconds": 195}, "data": [1, 1, 0, ...]}``, one sample per tick,
1 = a spot instance is available (alive) at that tick, 0 = preempted / no capacity.
Prices: ``{"prices": [...], "gap_seconds": 195, "price_info": {"on_demand_price": 3.06, ...}}``.

Both are replayed cyclically: time ``t`` (seconds since the trace's first tick) falls in tick
``floor(t / gap) mod len``. Files are named ``<zone>_<anything>.json`` (``us-east-1a_v100_1.json``)
when given as a directory; ``zone=FILE`` names the zone explicitly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from gpuorch.errors import UserInputError


@dataclass(frozen=True)
class Trace:
    zone: str
    gap_s: float
    data: bytes  # one byte a tick (0 or 1): a daemon on the sim keeps every zone's trace (~9 x 20k ticks)

    @classmethod
    def load(cls, zone: str, path: Path) -> Trace:
        raw = _read(path)
        try:
            gap, data = float(raw["metadata"]["gap_seconds"]), bytes(1 if int(v) > 0 else 0 for v in raw["data"])
        except (KeyError, TypeError, ValueError):
            raise UserInputError(f"{path}: not a spot trace; expected {{\"metadata\": {{\"gap_seconds\": N}}, "
                                 "\"data\": [1, 0, ...]}}") from None
        if gap <= 0 or not data:
            raise UserInputError(f"{path}: a spot trace needs gap_seconds > 0 and at least one sample")
        return cls(zone, gap, data)

    def _tick(self, t: float) -> int:
        return math.floor(t / self.gap_s)

    def available(self, t: float) -> bool:
        return self.data[self._tick(t) % len(self.data)] == 1

    def next_drop(self, t: float) -> float | None:
        """Start of the first tick after the one holding ``t`` whose sample is 0: when a spot
        instance alive at ``t`` is reclaimed. None if the trace never drops."""
        k, n = self._tick(t), len(self.data)
        start = (k + 1) % n
        j = self.data.find(0, start)
        if j < 0 and (j := self.data.find(0)) < 0:  # none from start on: the first of the next cycle
            return None
        return (k + 1 + (j - start) % n) * self.gap_s

    def fraction_available(self) -> float:
        return sum(self.data) / len(self.data)


@dataclass(frozen=True)
class PriceSeries:
    zone: str
    gap_s: float
    prices: tuple[float, ...]
    on_demand: float | None

    @classmethod
    def load(cls, zone: str, path: Path) -> PriceSeries:
        raw = _read(path)
        try:
            prices = tuple(float(p) for p in raw["prices"])
            gap = float(raw.get("gap_seconds", 0) or raw.get("metadata", {}).get("gap_seconds"))
            od = (raw.get("price_info") or {}).get("on_demand_price")
        except (KeyError, TypeError, ValueError):
            raise UserInputError(f"{path}: not a spot price series; expected {{\"prices\": [...], "
                                 "\"gap_seconds\": N}}") from None
        if gap <= 0 or not prices:
            raise UserInputError(f"{path}: a price series needs gap_seconds > 0 and at least one price")
        return cls(zone, gap, prices, float(od) if od is not None else None)

    def at(self, t: float) -> float:
        return self.prices[math.floor(t / self.gap_s) % len(self.prices)]


def zone_files(spec: str | list[str] | None, what: str) -> dict[str, Path]:
    """``zone=FILE`` pairs and/or directories of ``<zone>_*.json`` -> {zone: path}.

    Raises UserInputError naming the option (``what``) for a missing path or an unnamed file.
    """
    items = [spec] if isinstance(spec, str) else list(spec or [])
    found: dict[str, Path] = {}
    for item in items:
        zone, sep, file = item.partition("=")
        path = Path(file if sep else item).expanduser()
        if sep:
            if not path.is_file():
                raise UserInputError(f"{what}: {item!r}: {path} is not a file")
            found[zone] = path.resolve()
        elif path.is_dir():
            files = sorted(path.glob("*.json"))
            if not files:
                raise UserInputError(f"{what}: {path} holds no .json traces")
            found.update({f.name.split("_", 1)[0].removesuffix(".json"): f.resolve() for f in files})
        else:
            raise UserInputError(f"{what}: {item!r} is neither a directory nor ZONE=FILE")
    return found


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserInputError(f"{path}: cannot read it ({e})") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a JSON object")
    return data
