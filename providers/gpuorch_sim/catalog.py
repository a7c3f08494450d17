"""The sim provider's catalog: no shipped rows (its market replays traces, ``market.py``) and
its billing rule, per second with no minimum. Stdlib-only: entry point ``gpuorch.catalogs``."""

from __future__ import annotations

from gpuorch.provider.catalog import AdapterCatalog, BillingRule

CATALOG = AdapterCatalog(provider="sim", billing=BillingRule(1, 0))
