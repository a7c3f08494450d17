"""Each installed adapter's catalog (shipped rows, families, billing rule), found through the
entry-point group ``gpuorch.catalogs``. A catalog entry point names a stdlib-only module, so
reading catalogs (``gpuorch offers``) imports no SDK and no pydantic.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points

from gpuorch.catalog.adapter import AdapterCatalog
from gpuorch.money.billing import DEFAULT_RULE, BillingRule

CATALOG_GROUP = "gpuorch.catalogs"


@cache
def catalogs() -> dict[str, AdapterCatalog]:
    """Every installed adapter's catalog, by provider name (sorted). Read once per process.

    An entry point that cannot be loaded is left out: a broken adapter must not take
    ``gpuorch offers`` down for the others (``gpuorch doctor`` reports it)."""
    found = {ep.name: ep for ep in entry_points(group=CATALOG_GROUP)} | _shipped()
    out: dict[str, AdapterCatalog] = {}
    for name in sorted(found):
        try:
            out[name] = found[name].load()
        except ImportError:
            continue
    return out


@cache
def _shipped() -> dict[str, EntryPoint]:
    """gpuorch's own distribution's catalog entry points (the shipped adapters'): one metadata
    file read, where a scan of every installed distribution costs ~5 ms. A shipped adapter's name
    is the shipped adapter's, whatever another distribution registers."""
    try:
        return {ep.name: ep for ep in distribution("gpuorch").entry_points.select(group=CATALOG_GROUP)}
    except PackageNotFoundError:  # run from a source tree that is not installed
        return {}


@cache
def catalog_of(name: str) -> AdapterCatalog | None:
    """Provider ``name``'s catalog; a shipped adapter's is loaded alone (no scan of every
    installed distribution, no other adapter's catalog module: ``gpuorch offers`` starts fast)."""
    key = name.lower()
    ep = _shipped().get(key)
    if ep is None:
        return catalogs().get(key)
    try:
        return ep.load()
    except ImportError:  # left out, as catalogs() leaves it out
        return None


def billing_rule(provider: str) -> BillingRule:
    """The billing rule of a provider name (its adapter's catalog); a provider no installed adapter
    declares bills per hour with a 1 hour minimum (``DEFAULT_RULE``)."""
    found = catalog_of(provider)
    return found.billing if found is not None else DEFAULT_RULE
