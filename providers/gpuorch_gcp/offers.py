"""GCP offers: GCP's rows (its shipped ``data/offers.csv`` or ``catalog``) in the configured
zones and regions. No API call here: ``gpuorch catalog refresh --provider gcp`` (refresh.py)
reads ``machineTypes``/``acceleratorTypes`` and the Billing Catalog into the file read here."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpuorch.provider import Offer
from gpuorch.provider.catalog import load_offers

from .catalog import CATALOG
from .config import GcpOptions
from .parse import PROVIDER


def select_offers(offers: Iterable[Offer], options: GcpOptions) -> list[Offer]:
    """GCP offers in the configured zones (or every zone of the configured regions), one per
    (zone, instance type): the cheapest on-demand row if the catalog repeats one."""
    best: dict[tuple[str, str], Offer] = {}
    for o in offers:
        if o.provider != PROVIDER or not options.allows(o.zone):
            continue
        key = (o.zone, o.instance_type)
        if key not in best or o.price_per_hour < best[key].price_per_hour:
            best[key] = o
    return sorted(best.values(), key=lambda o: (o.zone, o.instance_type))


def catalog_path(options: GcpOptions, home: Path | None) -> Path:
    """The catalog offers come from: ``catalog`` if set; else the last good ``gpuorch catalog
    refresh --provider gcp`` (``$GPUORCH_HOME/catalog/gcp.csv``, which the daemon's scheduled
    refresh rewrites); else the shipped snapshot."""
    if options.catalog is not None:
        return Path(options.catalog)
    refreshed = home / "catalog" / "gcp.csv" if home is not None else None
    return refreshed if refreshed is not None and refreshed.exists() else CATALOG.rows  # type: ignore[return-value]


def catalog_offers(options: GcpOptions, home: Path | None = None) -> list[Offer]:
    return select_offers(load_offers(catalog_path(options, home)), options)
