"""The Azure catalog the tests run on: TEST DATA, not Azure's prices.

gpuorch ships no Azure price rows (docs/catalog.md, "Sources"): the adapter's offers come from a
Retail Prices refresh. The tests get theirs the same way: made-up meters (round figures, in the
Retail Prices API's shape, ``fake_prices.meter``) and ``resource_skus`` entries (shapes from the
adapter's ``SHAPES``, Azure's VM-size pages) go through the refresh's own parsers
(``pricing.retail_prices``, ``pricing.sku_rows``), and the result is written as a refresh writes it
(``gpuorch.catalog.refresh.write_catalog``) into ``$GPUORCH_HOME/catalog/azure.csv``.

``data/test-catalog.csv`` is the same catalog as a file, for tests outside this folder that need
Azure offers in a ``--catalog`` (``test_azure_test_catalog.py`` holds it equal to ``offers()``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fake_prices import meter

from gpuorch.provider.offer import Offer

SOURCE = "TEST DATA: made-up Retail Prices meters (tests/azure/azure_test_catalog.py), not Azure's prices"
FILE = Path(__file__).resolve().parent / "data" / "test-catalog.csv"
FETCHED_AT = datetime(2026, 12, 1, tzinfo=UTC)

# (size, GPUs, vCPUs, RAM GiB): as the adapter's SHAPES (the row audit holds rows to them).
SIZES = {"Standard_NC4as_T4_v3": (1, 4, 28), "Standard_NC24ads_A100_v4": (1, 24, 220),
         "Standard_ND96isr_H100_v5": (8, 96, 1900)}
# (size, region) -> (on-demand, spot or None), USD per hour: made-up round figures.
PRICES: dict[tuple[str, str], tuple[float, float | None]] = {
    ("Standard_NC4as_T4_v3", "eastus"): (0.5, 0.05),
    ("Standard_NC4as_T4_v3", "westus2"): (0.55, 0.06),
    ("Standard_NC24ads_A100_v4", "eastus"): (3.6, 0.45),
    ("Standard_NC24ads_A100_v4", "westus2"): (3.7, 0.5),
    ("Standard_NC24ads_A100_v4", "westus3"): (3.6, 0.4),
    ("Standard_ND96isr_H100_v5", "eastus"): (98.0, None),
}


def resource_sku(size: str, region: str, zones: list[str], gpus: int, vcpus: int, memory: int,
                 restrictions: list | None = None) -> dict[str, Any]:
    """One ``resource_skus`` entry in ARM's shape."""
    return {"resourceType": "virtualMachines", "name": size, "tier": "Standard",
            "size": size.removeprefix("Standard_"), "family": "standardNCFamily", "locations": [region],
            "locationInfo": [{"location": region, "zones": zones, "zoneDetails": []}],
            "capabilities": [{"name": "vCPUs", "value": str(vcpus)}, {"name": "MemoryGB", "value": str(memory)},
                             {"name": "GPUs", "value": str(gpus)}, {"name": "PremiumIO", "value": "True"}],
            "restrictions": restrictions or []}


def meters() -> list[dict[str, Any]]:
    out = []
    for (size, region), (price, spot) in PRICES.items():
        out.append(meter(size, region, price))
        if spot is not None:
            out.append(meter(size, region, spot, spot=True))
    return out


def skus() -> list[dict[str, Any]]:
    """Regional sizes (no zones): the offers' zone is the region."""
    return [resource_sku(size, region, [], *SIZES[size]) for size, region in PRICES]


def offers() -> list[Offer]:
    """The test catalog's offers, through the refresh's parsers."""
    from gpuorch_azure.pricing import retail_prices, sku_rows

    regions = sorted({region for _, region in PRICES})
    return [Offer(**r._asdict()) for r in sku_rows(skus(), regions, retail_prices(meters()))]


def file_text() -> str:
    """``data/test-catalog.csv``: the offers, each row marked as test data in its ``source`` column."""
    import io

    from gpuorch.catalog.rows import OfferRow, write_csv

    out = io.StringIO()
    write_csv((OfferRow(**o.model_dump(include=set(OfferRow._fields))) for o in offers()), out,
              (("source", SOURCE), ("as_of", FETCHED_AT.date().isoformat())))
    return out.getvalue()


def write(home: Path) -> Path:
    """Write the test catalog where a refresh would (``$GPUORCH_HOME/catalog/azure.csv``)."""
    from gpuorch.catalog.refresh import catalog_path, write_catalog

    path = catalog_path(home, "azure")
    write_catalog(path, "azure", offers(), SOURCE, FETCHED_AT)
    return path
