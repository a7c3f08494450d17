"""The daemon's scheduled catalog refresh (``catalog_refresh_s``): every provider with
``SupportsPriceRefresh`` (GCP, Azure) is asked for today's offers on a thread of its own (a price
catalog takes seconds to page through: never inside a pass) and the result is written to
``$GPUORCH_HOME/catalog/<provider>.csv`` (``gpuorch.catalog.refresh``), which those adapters'
``offers()`` read; the reconciler's offers TTL then picks it up. A refresh that fails, or lists
nothing, leaves the file as it was: the last good catalog stays, and the next try is a period
later. AWS needs none of this: its ``offers()`` reads its APIs (spot prices from
``describe_spot_price_history``) every offers TTL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from gpuorch.catalog.refresh import catalog_path, write_catalog
from gpuorch.errors import AuthError
from gpuorch.provider.port import Provider, SupportsPriceRefresh

log = logging.getLogger("gpuorch.catalog")


def audited(provider: str, offers: list[Any], report: Callable[[str], None] | None = None) -> list[Any]:
    """``offers`` less the rows the catalog audit (``gpuorch.catalog.audit``) fails; each finding
    goes to ``report`` as one line (default: the log), and flagged spot prices are kept."""
    from gpuorch.catalog import OfferRow
    from gpuorch.catalog.audit import audit_rows

    findings = audit_rows([OfferRow(**o.model_dump(include=set(OfferRow._fields))) for o in offers])
    for f in findings:
        line = f"{'left out' if f.severity == 'error' else 'flagged'}: {f.line(provider)}"
        if report is None:
            log.warning("catalog refresh of %s: %s", provider, line)
        else:
            report(line)
    bad = {f.index for f in findings if f.severity == "error"}
    return [o for i, o in enumerate(offers) if i not in bad]


def price_source(provider: Provider) -> str:
    """Where ``provider``'s refreshed prices come from (its declared ``price_source``)."""
    return provider.capabilities.price_source or f"{provider.name} offers()"


class Alarm(Protocol):
    """Told of a provider refusing the daemon's credentials: ``provider.credentials_failed``
    (``reconciler.observe.credentials.CredentialAlarm``, which tells it once an hour)."""

    def refused(self, provider: str, doing: str, error: AuthError) -> bool: ...


class CatalogRefresher:
    """Refreshes each price-refreshing provider's catalog every ``every_s`` (``run_due``), keeping
    the last good one on failure. ``start()`` runs it on a daemon thread until ``stop`` is set.
    ``alarm``: told when a provider refuses its credentials, from the refresh's thread."""

    def __init__(self, providers: Mapping[str, Provider], home: Path, every_s: float,
                 now: Callable[[], datetime], alarm: Alarm | None = None) -> None:
        self.providers = {n: p for n, p in providers.items() if isinstance(p, SupportsPriceRefresh)}
        self.home, self.every_s, self.now, self.alarm = home, every_s, now, alarm
        self.done_at: dict[str, datetime] = {}  # the last try, good or not
        self.errors: dict[str, str] = {}  # provider -> the last failure, until a refresh succeeds

    def run_due(self) -> list[str]:
        """Refresh the providers whose period has passed (all on the first call); the names refreshed."""
        refreshed = []
        for name, p in self.providers.items():
            at, now = self.done_at.get(name), self.now()
            if at is not None and (now - at).total_seconds() < self.every_s:
                continue
            self.done_at[name] = now
            try:
                offers = audited(name, p.refresh_offers())
                if not offers:
                    raise ValueError("the refresh listed no offers")
                summary = write_catalog(catalog_path(self.home, name), name, offers, price_source(p), self.now())
            except Exception as e:  # any failure: the last good catalog stays; try again next period
                self.errors[name] = str(e)
                log.warning("catalog refresh of %s failed (keeping the last good catalog): %s", name, e)
                if isinstance(e, AuthError) and self.alarm is not None:
                    self.alarm.refused(name, "refreshing the catalog", e)
                continue
            self.errors.pop(name, None)
            refreshed.append(name)
            log.info("catalog refresh of %s: %d offers from %s", name, summary["offers"], summary["source"])
        return refreshed

    def start(self, stop: threading.Event) -> threading.Thread | None:
        if not self.providers:
            return None

        def loop() -> None:
            while not stop.is_set():
                self.run_due()
                stop.wait(min(self.every_s, 60.0))  # wakes early on stop; run_due decides what is due

        t = threading.Thread(target=loop, name="catalog-refresh", daemon=True)
        t.start()
        return t
