"""Rebuild the shipped snapshot: each installed adapter's rows file, from public list prices.

    python -m gpuorch.catalog.snapshot DATA_DIR          # rewrite every adapter's data/offers.csv
    python -m gpuorch.catalog.snapshot DATA_DIR --check  # exit 1 if a shipped file differs

Each adapter's ``AdapterCatalog.builder`` (``gpuorch_<cloud>/snapshot.py``) turns ``DATA_DIR``
(``../shared/data``: price samples, the spot advisor) into its rows; the core only sorts and
writes them. Provenance, choices and gaps are documented in docs/catalog.md. Offline only; the
daemon never runs this.
"""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path

from gpuorch.catalog.adapter import AdapterCatalog
from gpuorch.catalog.rows import OfferRow, write_csv


def build_one(catalog: AdapterCatalog, data_dir: Path) -> str:
    """The CSV text of one adapter's rows, as shipped (sorted by instance type, region, zone)."""
    assert catalog.builder is not None
    module, _, func = catalog.builder.partition(":")
    rows: list[OfferRow] = getattr(importlib.import_module(module), func)(data_dir)
    out = io.StringIO()
    write_csv(sorted(rows, key=lambda r: (r.provider, r.instance_type, r.region, r.zone)), out)
    return out.getvalue()


def buildable() -> list[AdapterCatalog]:
    from gpuorch.catalog.registry import catalogs

    return [c for c in catalogs().values() if c.builder is not None and c.rows is not None]


def main(argv: list[str]) -> int:
    data_dir = Path(next((a for a in argv if not a.startswith("--")), "../shared/data"))
    stale = []
    for c in buildable():
        assert c.rows is not None
        text = build_one(c, data_dir)
        if "--check" in argv:
            if c.rows.read_text() != text:
                stale.append(str(c.rows))
        else:
            c.rows.write_text(text)
    for path in stale:
        print(f"{path}: differs from a rebuild; run python -m gpuorch.catalog.snapshot {data_dir}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
