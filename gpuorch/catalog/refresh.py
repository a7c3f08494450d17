"""Refreshed catalogs: writing one (``write_catalog``, whole, with provenance); the daemon's
schedule is ``gpuorch.ops.catalog_refresh``.

A refreshed catalog is ``$GPUORCH_HOME/catalog/<provider>.csv`` (plus its provenance sidecar).
The GCP adapter reads it in place of its shipped snapshot when it exists, and Azure (which ships
no price rows) reads only it, so the daemon's offers follow the last good refresh; AWS's
``offers()`` reads its APIs itself (spot prices from ``describe_spot_price_history``) every offers
TTL, so it needs no file.

"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuorch.catalog import provenance
from gpuorch.catalog.rows import OfferRow, write_csv


def catalog_path(home: Path, provider: str) -> Path:
    return home / "catalog" / f"{provider}.csv"


def write_catalog(path: Path, provider: str, offers: Iterable[Any], source: str, now: datetime) -> dict[str, Any]:
    """Write ``offers`` (the port's ``Offer``s) to ``path`` whole (temp file + rename: a reader never sees half a
    catalog), then its provenance; returns the summary ``catalog refresh`` prints."""
    offers = list(offers)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            write_csv((OfferRow(**o.model_dump(include=set(OfferRow._fields))) for o in offers), f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    record = provenance.write(path, provider=provider, source=source, fetched_at=now, offers=len(offers))
    return {"provider": provider, "path": str(path), "offers": len(offers),
            "regions": sorted({o.region for o in offers}), "instance_types": sorted({o.instance_type for o in offers}),
            "source": source, "fetched_at": record["fetched_at"]}

