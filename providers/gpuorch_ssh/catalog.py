"""The SSH pool's catalog: no shipped rows (its offers come from its hosts) and its billing rule,
per second with no minimum (owned capacity, at the configured rate). Stdlib-only: entry point
``gpuorch.catalogs``."""

from __future__ import annotations

from gpuorch.provider.catalog import AdapterCatalog, BillingRule

CATALOG = AdapterCatalog(provider="ssh", billing=BillingRule(1, 0))
