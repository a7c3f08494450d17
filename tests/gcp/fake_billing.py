"""A fake Cloud Billing Catalog API on 127.0.0.1 (plain HTTP, random port) for the GCP price refresh.

``GET /v1/services/{service}/skus[?pageSize=&pageToken=]`` answers SKUs in the API's JSON shape
(camelCase: ``skuId``, ``description``, ``category.resourceFamily/resourceGroup/usageType``,
``serviceRegions``, ``pricingInfo[].pricingExpression.tieredRates[].unitPrice.units/nanos``),
paged like the API: at most ``page_size`` per page (the smaller of it and the client's
``pageSize``) with a ``nextPageToken`` until the last page. ``refuse_disabled()`` answers 403
``SERVICE_DISABLED`` as Google does for a project without the Cloud Billing API enabled.
``sku(...)`` builds one SKU the way the catalog lists Compute Engine's.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.kit.http import JsonHandler

COMPUTE = "6F81-5844-456A"
GEO = {"us-central1": "Iowa", "us-east4": "Virginia", "europe-west4": "Netherlands"}


def sku(sku_id: str, description: str, group: str, usage: str, regions: list[str], usd: float,
        unit: str = "h") -> dict[str, Any]:
    units, nanos = int(usd), round((usd - int(usd)) * 1e9)
    return {
        "name": f"services/{COMPUTE}/skus/{sku_id}", "skuId": sku_id, "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                     "resourceGroup": group, "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "summary": "", "effectiveTime": "2026-11-30T08:00:00.000Z", "currencyConversionRate": 1,
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1, "usageUnitDescription": "hour", "baseUnit": "s",
                "baseUnitDescription": "second", "baseUnitConversionFactor": 3600,
                "tieredRates": [{"startUsageAmount": 0,
                                 "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}}],
            },
        }],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "REGIONAL", "regions": regions},
    }  # fmt: skip


class FakeBilling:
    def __init__(self) -> None:
        self.skus: list[dict[str, Any]] = []
        self.page_size = 3
        self.disabled = False
        self.requests: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.skus, self.page_size, self.disabled, self.requests = [], 3, False, []

    def refuse_disabled(self) -> None:
        self.disabled = True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append({"path": path, **query})
            if self.disabled:
                message = ("Cloud Billing API has not been used in project 123456 before or it is disabled. Enable it "
                           "by visiting https://console.developers.google.com/apis/api/cloudbilling.googleapis.com")
                return 403, {"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED", "details": [
                    {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                     "domain": "googleapis.com", "metadata": {"service": "cloudbilling.googleapis.com"}}]}}
            if path != f"/v1/services/{COMPUTE}/skus":
                return 404, {"error": {"code": 404, "message": f"no {path}", "status": "NOT_FOUND"}}
            start = int(query.get("pageToken") or 0)
            size = min(self.page_size, int(query.get("pageSize") or 5000))
            page: dict[str, Any] = {"skus": self.skus[start:start + size]}
            if start + size < len(self.skus):
                page["nextPageToken"] = str(start + size)
            return 200, page


def _handler(fake: FakeBilling) -> type:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlparse(self.path)
            status, body = fake.answer(url.path, {k: v[0] for k, v in parse_qs(url.query).items()})
            self.reply(status, body)

    return Handler
