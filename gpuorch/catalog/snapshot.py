"""Rebuild the shipped snapshot: each installed adapter's rows file, from public list prices.

    python -m gpuorch.catalog.snapshot DATA_DIR          # rewrite every adapter's data/offers.csv
    python -m gpuorch.catalog.snapshot DATA_DIR --check  # exit 1 if a shipped file differs

Each adapter's ``AdapterCatalog.builder`` (``gpuorch_<cloud>/snapshot.py``) turns ``DATA_DIR``
(``../shared/data``: price samples, the spot advisor) into its rows, and may return some as
``Dropped`` (a check only it can make, e.g. GCP's host and GPU parts). The core runs the row audit
(``gpuorch.catalog.audit``) over the rest: a row with an error is dropped too. The shipped rows go
to ``data/offers.csv`` (sorted, each with the ``source`` and ``as_of`` of ``catalog.sources``), the
dropped ones with their reasons to ``data/dropped.csv`` beside
it, so the snapshot passes its own audit by rule and says what it left out. Provenance, choices and
gaps are documented in docs/catalog.md. Offline only; the daemon never runs this.
"""

from __future__ import annotations

import csv
import importlib
import io
import sys
from pathlib import Path

from gpuorch.catalog.adapter import AdapterCatalog
from gpuorch.catalog.rows import Dropped, OfferRow, number_text, write_csv

DROPPED_COLUMNS = ("provider", "region", "zone", "instance_type", "price_per_hour", "spot_price_per_hour", "check",
                   "reason")


def _order(r: OfferRow) -> tuple[str, str, str, str]:
    return r.provider, r.instance_type, r.region, r.zone


def build_rows(catalog: AdapterCatalog, data_dir: Path) -> tuple[list[OfferRow], list[Dropped]]:
    """One adapter's rows as shipped and the rows dropped, each sorted by instance type, region, zone."""
    from gpuorch.catalog.audit import audit_rows, errors

    assert catalog.builder is not None
    module, _, func = catalog.builder.partition(":")
    built: list[OfferRow | Dropped] = getattr(importlib.import_module(module), func)(data_dir)
    rows = [r for r in built if isinstance(r, OfferRow)]
    dropped = [d for d in built if isinstance(d, Dropped)]
    reasons: dict[int, list[str]] = {}
    checks: dict[int, str] = {}
    for f in errors(audit_rows(rows)):
        reasons.setdefault(f.index, []).append(f.message.split(": ", 1)[-1])  # the row is on the line already
        checks.setdefault(f.index, f.check)
    dropped += [Dropped(r, checks[i], "; ".join(reasons[i])) for i, r in enumerate(rows) if i in reasons]
    kept = [r for i, r in enumerate(rows) if i not in reasons]
    return sorted(kept, key=_order), sorted(dropped, key=lambda d: _order(d.row))


def build_one(catalog: AdapterCatalog, data_dir: Path) -> tuple[str, str]:
    """The CSV texts of one adapter's shipped rows and of its dropped rows ("" when none: no file)."""
    from gpuorch.catalog.sources import SNAPSHOT

    kept, dropped = build_rows(catalog, data_dir)
    out = io.StringIO()
    where = SNAPSHOT.get(catalog.provider)
    write_csv(kept, out, (("source", where.source), ("as_of", where.as_of)) if where else ())
    if not dropped:
        return out.getvalue(), ""
    gone = io.StringIO()
    writer = csv.writer(gone, lineterminator="\n")
    writer.writerow(DROPPED_COLUMNS)
    for d in dropped:
        r = d.row
        writer.writerow([r.provider, r.region, r.zone, r.instance_type, number_text(r.price_per_hour),
                         "" if r.spot_price_per_hour is None else number_text(r.spot_price_per_hour), d.check,
                         d.reason])
    return out.getvalue(), gone.getvalue()


def dropped_file(catalog: AdapterCatalog) -> Path:
    assert catalog.rows is not None
    return catalog.rows.with_name("dropped.csv")


def buildable() -> list[AdapterCatalog]:
    from gpuorch.catalog.registry import catalogs

    return [c for c in catalogs().values() if c.builder is not None and c.rows is not None]


def main(argv: list[str]) -> int:
    data_dir = Path(next((a for a in argv if not a.startswith("--")), "../shared/data"))
    stale = []
    for c in buildable():
        assert c.rows is not None
        shipped, dropped = build_one(c, data_dir)
        for path, text in ((c.rows, shipped), (dropped_file(c), dropped)):
            if "--check" in argv:
                if (path.read_text() if path.exists() else "") != text:
                    stale.append(str(path))
            elif text:
                path.write_text(text)
            else:
                path.unlink(missing_ok=True)
    for name in stale:
        print(f"{name}: differs from a rebuild; run python -m gpuorch.catalog.snapshot {data_dir}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
