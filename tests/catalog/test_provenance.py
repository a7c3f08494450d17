"""Every shipped price row names its source and date (issue 36; gpuorch.catalog.sources)."""

from __future__ import annotations

import csv
import datetime as dt

import pytest

from gpuorch.catalog.registry import catalogs
from gpuorch.catalog.sources import SNAPSHOT, bounds

# The clouds' own price APIs, one of which every hyperscaler row must name.
CLOUD_APIS = {"aws": "AWS Price List API", "gcp": "Cloud Billing Catalog API", "azure": "Azure Retail Prices API"}


def shipped() -> dict[str, list[dict[str, str]]]:
    out = {}
    for c in catalogs().values():
        if c.rows is not None and c.rows.exists():
            with c.rows.open(newline="") as f:
                out[c.provider] = list(csv.DictReader(f))
    return out


SHIPPED = shipped()


@pytest.mark.parametrize("provider", sorted(SHIPPED))
def test_every_shipped_row_names_its_source_and_a_date_no_later_than_today(provider):
    rows = SHIPPED[provider]
    assert rows, provider
    for i, r in enumerate(rows, start=2):
        assert (r.get("source") or "").strip(), f"{provider} line {i}: no source"
        first, last = bounds(r.get("as_of") or "")
        assert last <= dt.date.today() and (first is None or first <= last), f"{provider} line {i}: {r['as_of']}"


def test_hyperscaler_rows_name_the_clouds_own_price_api():
    # Azure ships none: no first-party copy of its per-size prices could be cited (docs/catalog.md)
    assert "azure" not in SHIPPED and "azure" not in SNAPSHOT
    for provider, api in CLOUD_APIS.items():
        if provider == "azure":
            continue
        assert provider in SHIPPED and provider in SNAPSHOT
        assert {r["source"] for r in SHIPPED[provider]} == {SNAPSHOT[provider].source}
        assert api in SNAPSHOT[provider].source


def test_no_shipped_row_rests_on_a_repository_without_a_licence():
    assert {p for p, v in SNAPSHOT.items() if not v.licensed} == set()  # issue 36: replaced or removed
    assert not any("no licence" in r["source"] for rows in SHIPPED.values() for r in rows)
    assert "skypilot-org/skypilot-catalog" not in " ".join(r["source"] for rows in SHIPPED.values() for r in rows)


@pytest.mark.parametrize("bad", ["", "2026", "26-11-29", "2026-11-29/2025-01-01", "2026-13-01", "soon", "../"])
def test_a_malformed_date_is_refused(bad):
    with pytest.raises(ValueError):
        bounds(bad)


def test_dates_intervals_and_open_starts_parse():
    assert bounds("2025-06-01") == (dt.date(2025, 6, 1), dt.date(2025, 6, 1))
    assert bounds("2026-05/2026-06") == (dt.date(2026, 5, 1), dt.date(2026, 6, 1))
    assert bounds("../2026-11-29") == (None, dt.date(2026, 11, 29))
