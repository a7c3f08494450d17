"""Azure offers: Azure's shipped rows (``data/offers.csv``) (or a user's catalog CSV) in the configured
regions. No API call: Azure's retail prices and SKU availability change rarely enough for the
snapshot, which ``gpuorch catalog refresh`` (and docs/catalog.md) keep current."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpuorch.provider import Offer
from gpuorch.provider.catalog import load_offers

from .catalog import CATALOG
from .config import AzureOptions
from .names import split_zone
from .parse import PROVIDER

# Where ``refresh_offers`` reads its prices and sizes (the provider's declared ``price_source``).
PRICE_SOURCE = "Azure Retail Prices API (prices.azure.com) + resource_skus (sizes, zones)"


def select_offers(offers: Iterable[Offer], options: AzureOptions) -> list[Offer]:
    """Azure offers in the configured regions, one per (zone, instance type), sorted. A zone is
    the region itself (a regional VM) or ``<region>-<n>`` (availability zone n, from resource_skus)."""
    regions = set(options.regions)
    seen: dict[tuple[str, str], Offer] = {}
    for o in offers:
        if o.provider == PROVIDER and o.region in regions and _placeable(o):
            seen.setdefault((o.zone, o.instance_type), o)
    return sorted(seen.values(), key=lambda o: (o.region, o.zone, o.instance_type))


def _placeable(o: Offer) -> bool:
    try:
        split_zone(o.zone, o.region)
    except ValueError:
        return False
    return True


def catalog_path(options: AzureOptions, home: Path | None) -> Path:
    """The catalog offers come from: ``catalog`` if set; else the last good ``gpuorch catalog
    refresh --provider azure`` (``$GPUORCH_HOME/catalog/azure.csv``, which the daemon's scheduled
    refresh rewrites); else the shipped snapshot."""
    if options.catalog is not None:
        return Path(options.catalog)
    refreshed = home / "catalog" / "azure.csv" if home is not None else None
    return refreshed if refreshed is not None and refreshed.exists() else CATALOG.rows  # type: ignore[return-value]


def catalog_offers(options: AzureOptions, home: Path | None = None) -> list[Offer]:
    return select_offers(load_offers(catalog_path(options, home)), options)
