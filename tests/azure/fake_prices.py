"""A fake Azure Retail Prices API on 127.0.0.1 (plain HTTP, random port): ``GET /api/retail/prices``.

Answers ``Items`` in the API's shape (``currencyCode``, ``retailPrice``, ``armRegionName``,
``armSkuName``, ``skuName`` with " Spot"/" Low Priority", ``productName`` with "Windows",
``serviceName``, ``type``, ``unitOfMeasure``, ``effectiveStartDate``...) filtered by the
``$filter``'s ``armRegionName eq '...'``, ``page_size`` per page with an absolute
``NextPageLink`` (``$skip``) until the last page, as the real API does (100 per page there).
No credentials, like the real one. ``meter(...)`` builds one item.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from http.server import ThreadingHTTPServer
from typing import Any

from tests.kit.http import JsonHandler


def meter(size: str, region: str, price: float, *, spot: bool = False, windows: bool = False,
          low_priority: bool = False, effective: str = "2026-11-01T00:00:00Z") -> dict[str, Any]:
    short = size.removeprefix("Standard_").replace("_", " ")
    sku = short + (" Spot" if spot else " Low Priority" if low_priority else "")
    series = "NCasT4_v3" if "T4" in size else "NCadsA100v4" if "A100" in size else "N"
    return {
        "currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
        "armRegionName": region, "location": {"eastus": "US East", "westus2": "US West 2"}.get(region, region),
        "effectiveStartDate": effective, "meterId": f"m-{size}-{region}-{sku}-{windows}", "meterName": sku,
        "productId": "DZH318Z0BQ4W", "skuId": f"DZH318Z0BQ4W/{len(sku):04d}",
        "productName": f"Virtual Machines {series} Series{' Windows' if windows else ''}", "skuName": sku,
        "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour", "type": "Consumption", "isPrimaryMeterRegion": True, "armSkuName": size,
    }  # fmt: skip


class FakePrices:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.page_size = 2
        self.requests: list[str] = []
        self.broken = False  # answer a page that is not the API's shape
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/retail/prices"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.items, self.page_size, self.requests, self.broken = [], 2, [], False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def page(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        self.requests.append(path)
        if path != "/api/retail/prices":
            return 404, {"Error": {"Code": "NotFound", "Message": path}}
        if self.broken:
            return 200, {"BillingCurrency": "USD", "items": "not a list"}
        region = re.search(r"armRegionName eq '([^']+)'", query.get("$filter", ""))
        found = [i for i in self.items if region is None or i["armRegionName"] == region[1]]
        skip = int(query.get("$skip", "0"))
        chunk = found[skip:skip + self.page_size]
        nxt = None
        if skip + self.page_size < len(found):
            nxt = f"{self.url}?{urllib.parse.urlencode({**query, '$skip': str(skip + self.page_size)})}"
        return 200, {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
                     "Items": chunk, "NextPageLink": nxt, "Count": len(chunk)}


def _handler(fake: FakePrices) -> type:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            status, body = fake.page(url.path, {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()})
            self.reply(status, body)

    return Handler
