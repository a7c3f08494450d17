"""Azure offers: Azure's shipped rows (``data/offers.csv``) (or a user's catalog CSV) in the configured
regions. No API call: Azure's retail prices and SKU availability change rarely enough for the
snapshot, which ``gpuorch catalog refresh`` (and docs/catalog.md) keep current."""

from __future__ import annotations

from collections.abc import Iterable

from gpuorch.provider import Offer
from gpuorch.provider.catalog import load_offers

from .catalog import CATALOG
from .config import AzureOptions
from .names import split_zone
from .parse import PROVIDER


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


def catalog_offers(options: AzureOptions) -> list[Offer]:
    return select_offers(load_offers(options.catalog if options.catalog is not None else CATALOG.rows), options)
