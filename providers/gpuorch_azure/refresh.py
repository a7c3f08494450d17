"""``gpuorch catalog refresh --provider azure`` (and the daemon's scheduled refresh): today's Azure
offers from the public Retail Prices API (no credentials; spot meters included) and the
subscription's ``resource_skus`` (capabilities, and which zones have which sizes), joined by
``pricing.py``.

The Retail Prices API is read with the standard library (one GET per page, following
``NextPageLink`` on the same host only); ``resource_skus`` through azure-mgmt-compute with the
adapter's credential and retry policy. A refused SKU listing names the permission; an answer
that does not parse is a PermanentError and the caller keeps its last catalog.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from gpuorch.errors import AuthError, PermanentError, TransientError
from gpuorch.provider import Offer

from .calls import Arm
from .config import AzureOptions
from .offers import select_offers
from .pricing import PriceError, retail_prices, sku_rows

SKUS_FIX = "grant Microsoft.Compute/skus/read (the Reader role on the subscription)"
MAX_PAGES = 200  # a region's VM meters are a few thousand, 100 per page


def retail_items(endpoint: str, region: str, *, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every Virtual Machines consumption meter of ``region``, all pages."""
    query = urllib.parse.urlencode({"$filter": f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
                                               f"and armRegionName eq '{region}'"})
    url: str | None = f"{endpoint}?{query}"
    host = urllib.parse.urlsplit(endpoint).netloc
    items: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        if url is None:
            return items
        if urllib.parse.urlsplit(url).netloc.split(":")[0] != host.split(":")[0]:
            raise PermanentError(f"azure Retail Prices: NextPageLink {url!r} leaves {host}", code="Unparseable")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}),
                                        timeout=timeout_s) as response:
                page = json.load(response)
        except urllib.error.HTTPError as e:
            cls = TransientError if e.code == 429 or e.code >= 500 else PermanentError
            raise cls(f"azure Retail Prices {region}: HTTP {e.code}", code=str(e.code)) from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise TransientError(f"azure Retail Prices {region}: {e}", code="ConnectionError") from None
        except ValueError as e:
            raise PermanentError(f"azure Retail Prices {region}: not JSON ({e})", code="Unparseable") from None
        if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
            raise PermanentError(f"azure Retail Prices {region}: an answer without Items", code="Unparseable")
        items.extend(page["Items"])
        url = page.get("NextPageLink") or None
    raise PermanentError(f"azure Retail Prices {region}: more than {MAX_PAGES} pages", code="Unparseable")


def live_offers(arm: Arm, options: AzureOptions) -> list[Offer]:
    skus: list[dict[str, Any]] = []
    try:
        for region in options.regions:
            skus.extend(arm.resource_skus(region))
    except AuthError as e:
        raise AuthError(f"azure catalog refresh: listing resource SKUs was refused: {SKUS_FIX} ({e})",
                        code=e.code) from None
    items = [i for region in options.regions for i in retail_items(options.prices_endpoint, region)]
    try:
        rows = sku_rows(skus, options.regions, retail_prices(items))
    except PriceError as e:
        raise PermanentError(f"azure catalog refresh: an answer did not parse: {e}", code="Unparseable") from None
    return select_offers((Offer(**r._asdict()) for r in rows), options)
