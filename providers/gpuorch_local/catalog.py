"""The local provider's catalog: no shipped rows (it builds its market itself, ``market.py``, whose
``catalog_offers`` the class's calls too), and its billing rule, per second with no minimum (nothing
is billed; the rule keeps the money arithmetic honest). Stdlib-only: entry point ``gpuorch.catalogs``."""

from __future__ import annotations

from gpuorch.provider.catalog import AdapterCatalog, BillingRule

CATALOG = AdapterCatalog(provider="local", billing=BillingRule(1, 0), offers="gpuorch_local.market:catalog_offers")
