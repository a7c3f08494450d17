"""The adapter kit's catalog names: what an adapter declares about its catalog
(``AdapterCatalog``, ``Family``, ``BillingRule``, from ``gpuorch.catalog.adapter``), the row type
and reader for its CSV, and ``load_offers``, the catalog as typed ``Offer`` objects.

Importing this module stays free of pydantic: ``load_offers`` imports the port only when called.
The row audit's names (``audit_rows``, ``part_findings``, ``Finding``, ``MIN_SPOT_FRACTION``) are
imported on first use (PEP 562): the snapshot builders use them, ``gpuorch offers`` does not.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpuorch.catalog import OfferRow, catalog_key, load_rows, snapshot_files, strict_now
from gpuorch.catalog.adapter import AdapterCatalog, BillingRule, Family, Shape, gpu_memory_mib, price_or_none
from gpuorch.catalog.rows import Dropped

if TYPE_CHECKING:
    from gpuorch.catalog.audit import MIN_SPOT_FRACTION, Finding, audit_rows, part_findings
    from gpuorch.provider.offer import Offer

__all__ = ["MIN_SPOT_FRACTION", "AdapterCatalog", "BillingRule", "Dropped", "Family", "Finding", "OfferRow", "Shape",
           "audit_rows", "gpu_memory_mib", "load_offers", "load_rows", "part_findings", "price_or_none"]

_AUDIT = ("MIN_SPOT_FRACTION", "Finding", "audit_rows", "part_findings")

_OFFERS: dict[tuple[str, int, int, bool], list[Offer]] = {}


def load_offers(path: str | os.PathLike[str] | None = None) -> list[Offer]:
    """Typed offers from ``path``, or the shipped snapshot when None. Raises UserInputError."""
    if path is None:
        return [o for f in snapshot_files() for o in load_offers(f)]
    key = (*catalog_key(path), strict_now())  # a strict read refuses what a lenient one skipped
    if key not in _OFFERS:
        from gpuorch.provider.offer import Offer  # pydantic: only when typed offers are asked for

        # Rows are validated by the CSV parser already; construct without re-validating.
        _OFFERS[key] = [Offer.model_construct(**row._asdict()) for row in load_rows(path)]
    return list(_OFFERS[key])


def __getattr__(name: str) -> Any:
    if name not in _AUDIT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from gpuorch.catalog import audit

    value = getattr(audit, name)
    globals()[name] = value  # resolved once
    return value
