"""Where a catalog's prices came from and when: ``<catalog>.provenance.json`` beside a refreshed
catalog CSV (``gpuorch catalog refresh`` writes it, ``offers`` and ``plan`` read it to say how
old the prices are). Stdlib only. A catalog without one is the shipped snapshot (or a file of
the user's), of unknown age: its line says so and how to refresh it.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SUFFIX = ".provenance.json"


def sidecar(catalog: str | os.PathLike[str]) -> Path:
    path = Path(catalog)
    return path.with_name(path.name + SUFFIX)


def write(catalog: str | os.PathLike[str], *, provider: str, source: str, fetched_at: datetime,
          offers: int) -> dict[str, Any]:
    """Write the sidecar whole (temp file + rename) and return what it says."""
    record = {"provider": provider, "source": source, "fetched_at": fetched_at.astimezone(UTC).isoformat(),
              "offers": offers}
    path = sidecar(catalog)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return record


def read(catalog: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sidecar's record, or None when there is none (or it does not parse, or the catalog it
    describes is gone)."""
    if not Path(catalog).exists():
        return None
    from gpuorch.errors import UserInputError
    from gpuorch.userfile import read_text

    try:  # bounded: a sidecar that is a device or a huge file counts as none
        record = json.loads(read_text(sidecar(catalog), option="provenance", what="a provenance record", limit=1 << 16))
        datetime.fromisoformat(record["fetched_at"])
        return dict(record)
    except (UserInputError, ValueError, KeyError, TypeError):
        return None


def age_s(record: dict[str, Any], now: datetime) -> float:
    return max(0.0, (now - datetime.fromisoformat(record["fetched_at"])).total_seconds())


def describe_age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def freshness(catalog: str | os.PathLike[str] | None, now: datetime) -> dict[str, Any]:
    """What ``offers`` and ``plan`` say about a catalog's prices: ``{"catalog", "as_of", "age_s",
    "source", "line"}``; ``as_of``/``age_s`` None for a catalog of unknown age."""
    record = read(catalog) if catalog is not None else None
    name = str(catalog) if catalog is not None else "the shipped snapshot"
    if record is None:
        return {"catalog": name, "as_of": None, "age_s": None, "source": None,
                "line": f"prices: {name}, of unknown age (not refreshed); `gpuorch catalog refresh --provider NAME` "
                        "fetches today's"}
    age = age_s(record, now)
    return {"catalog": name, "as_of": record["fetched_at"], "age_s": round(age), "source": record["source"],
            "line": f"prices: {record['provider']} as of {record['fetched_at']} ({describe_age(age)} old), "
                    f"from {record['source']}"}
