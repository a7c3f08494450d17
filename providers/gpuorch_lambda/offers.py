"""Lambda offers without a call (``submit``'s fit check, ``offers``/``plan`` offline): the rows of
``catalog`` if set, else of the last ``gpuorch catalog refresh --provider lambda``
(``$GPUORCH_HOME/catalog/lambda.csv``), else of the shipped snapshot, in the configured regions."""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider import Offer
from gpuorch.provider.catalog import load_offers

from .catalog import CATALOG, PROVIDER
from .config import LambdaOptions


def catalog_path(options: LambdaOptions, home: Path | None) -> Path:
    if options.catalog is not None:
        return Path(options.catalog)
    refreshed = home / "catalog" / f"{PROVIDER}.csv" if home is not None else None
    if refreshed is not None and refreshed.exists():
        return refreshed
    assert CATALOG.rows is not None
    return CATALOG.rows


def catalog_offers(options: LambdaOptions, home: Path | None = None) -> list[Offer]:
    return [o for o in load_offers(catalog_path(options, home)) if o.provider == PROVIDER and options.allows(o.region)]
