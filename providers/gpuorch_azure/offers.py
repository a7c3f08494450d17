"""Azure offers: the last Retail Prices refresh (``$GPUORCH_HOME/catalog/azure.csv``, written by
``gpuorch catalog refresh --provider azure`` and by the daemon at start and every
``catalog_refresh_s``) or a user's ``catalog:`` CSV, in the configured regions. No API call here.
gpuorch ships no Azure price rows (docs/catalog.md, "Sources"): before the first refresh Azure has
no offers, and ``prices_line`` says so."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from gpuorch.errors import UserInputError
from gpuorch.provider import Offer
from gpuorch.provider.catalog import load_offers

from .config import AzureOptions
from .names import split_zone
from .parse import PROVIDER

log = logging.getLogger("gpuorch.azure")

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


REFRESH_HINT = ("run `gpuorch catalog refresh --provider azure` (the daemon also fetches them from the Retail "
                "Prices API at start and every catalog_refresh_s), or set providers.azure.catalog")


def catalog_path(options: AzureOptions, home: Path | None) -> Path | None:
    """The catalog offers come from: ``catalog`` if set; else the last good ``gpuorch catalog
    refresh --provider azure`` (``$GPUORCH_HOME/catalog/azure.csv``, which the daemon's scheduled
    refresh rewrites); else None: no prices yet (nothing is shipped for Azure)."""
    if options.catalog is not None:
        return Path(options.catalog)
    refreshed = home / "catalog" / "azure.csv" if home is not None else None
    return refreshed if refreshed is not None and refreshed.exists() else None


def catalog_offers(options: AzureOptions, home: Path | None = None) -> list[Offer]:
    """The catalog's Azure offers in the configured regions; none before the first refresh."""
    path = catalog_path(options, home)
    return [] if path is None else select_offers(load_offers(path), options)


def prices_line(options: AzureOptions, home: Path | None) -> tuple[bool, str]:
    """Whether Azure has a price catalog, and one line saying where its prices come from."""
    path = catalog_path(options, home)
    if path is None:
        return False, f"no Azure prices yet: gpuorch ships none; {REFRESH_HINT}"
    if options.catalog is not None:
        return True, f"prices from providers.azure.catalog {path}"
    return True, f"prices from the last Retail Prices refresh, {path} (`gpuorch offers --provider azure` dates it)"


def require_offers(offers: list[Offer], options: AzureOptions, home: Path | None, *, given: bool) -> None:
    """The start-up check: a catalog (``given`` offers, ``catalog:`` or a refresh) must have an
    offer in the configured regions, else UserInputError naming ``regions``. With no catalog yet
    the adapter starts without offers and logs where its prices will come from."""
    priced, line = prices_line(options, home)
    if not given and not priced:
        log.warning("azure: %s", line)
    elif not offers:
        raise UserInputError(f"providers.azure.regions: the catalog has no Azure offer in "
                             f"{', '.join(options.regions)}; pick regions it lists (`gpuorch offers --provider azure`)")
