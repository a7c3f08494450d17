"""The sim provider's catalog: no shipped rows (its market replays traces, ``market.py``), its
billing rule, per second with no minimum, and what its volumes cost while they exist (EBS gp3's
list price, $0.08 per GiB-month in us-east-1: the market sells AWS's p3 by default; the daemon
bills it as every provider's storage, gpuorch.money.storage). Stdlib-only: entry point
``gpuorch.catalogs``."""

from __future__ import annotations

from gpuorch.provider.catalog import AdapterCatalog, BillingRule

CATALOG = AdapterCatalog(provider="sim", billing=BillingRule(1, 0), storage_usd_per_gib_month=0.08)
