"""Each installed adapter's catalog (shipped rows, families, billing rule), found through the
entry-point group ``gpuorch.catalogs``. A catalog entry point names a stdlib-only module, so
reading catalogs (``gpuorch offers``) imports no SDK and no pydantic.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from gpuorch.catalog.adapter import AdapterCatalog
from gpuorch.money.billing import DEFAULT_RULE, BillingRule

CATALOG_GROUP = "gpuorch.catalogs"


@cache
def catalogs() -> dict[str, AdapterCatalog]:
    """Every installed adapter's catalog, by provider name (sorted). Read once per process.

    An entry point that cannot be loaded is left out: a broken adapter must not take
    ``gpuorch offers`` down for the others (``gpuorch doctor`` reports it)."""
    out: dict[str, AdapterCatalog] = {}
    for ep in sorted(entry_points(group=CATALOG_GROUP), key=lambda e: e.name):
        try:
            out[ep.name] = ep.load()
        except ImportError:
            continue
    return out


def catalog_of(name: str) -> AdapterCatalog | None:
    return catalogs().get(name.lower())


def billing_rule(provider: str) -> BillingRule:
    """The billing rule of a provider name (its adapter's catalog); a provider no installed adapter
    declares bills per hour with a 1 hour minimum (``DEFAULT_RULE``)."""
    found = catalog_of(provider)
    return found.billing if found is not None else DEFAULT_RULE
