"""The capacity knob: ``<home>/capacity.json`` makes markets of the local provider run out.

    {"unavailable": ["local-east-a/local.a100-80gb.1/spot", "local-west-a/*/*"]}

Each entry is ``ZONE/INSTANCE_TYPE/MARKET`` (market ``spot`` or ``on-demand``); shell-style
wildcards match several. Launching into a matching market raises ``NoCapacityError``, the way a
cloud answers ``InsufficientInstanceCapacity``. The file is read on every launch, so tests and
demos may edit it while the daemon runs; a missing or unreadable file means "all available".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from gpuorch.agent.protocol import write_atomic

CAPACITY_FILE = "capacity.json"


def market(spot: bool) -> str:
    return "spot" if spot else "on-demand"


def capacity_key(zone: str, instance_type: str, spot: bool) -> str:
    return f"{zone}/{instance_type}/{market(spot)}"


def read_unavailable(home: Path) -> list[str]:
    try:
        data = json.loads((home / CAPACITY_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    entries = data.get("unavailable", []) if isinstance(data, dict) else []
    return [str(e) for e in entries]


def write_unavailable(home: Path, entries: Iterable[str]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    write_atomic(home / CAPACITY_FILE, json.dumps({"unavailable": sorted(set(entries))}, indent=2) + "\n")


def set_available(home: Path, zone: str, instance_type: str, spot: bool, available: bool) -> None:
    """Add or remove this market's exact entry (wildcard entries stay)."""
    key = capacity_key(zone, instance_type, spot)
    entries = set(read_unavailable(home))
    write_unavailable(home, entries - {key} if available else entries | {key})


def is_unavailable(home: Path, zone: str, instance_type: str, spot: bool) -> bool:
    key = capacity_key(zone, instance_type, spot)
    return any(fnmatchcase(key, pattern) for pattern in read_unavailable(home))
