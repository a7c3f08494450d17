"""Live Azure offers: VM sizes, their capabilities and zones from ``resource_skus`` priced from the
public Retail Prices API. Pure functions over the two APIs' JSON, unit-tested alone; ``refresh.py``
makes the calls.

- **Prices** (``https://prices.azure.com/api/retail/prices``, no credentials, paged by
  ``NextPageLink``): ``Items`` of ``serviceName`` "Virtual Machines", ``type`` "Consumption",
  per ``armRegionName`` and ``armSkuName``; a ``skuName`` ending in " Spot" is the spot meter,
  " Low Priority" (Batch) and Windows products (``productName`` "... Windows") are skipped. The
  price is ``retailPrice`` per "1 Hour" in USD; of several meters for one size the newest
  ``effectiveStartDate`` stands.
- **Sizes** (``GET /subscriptions/{s}/providers/Microsoft.Compute/skus``): ``resourceType``
  "virtualMachines", ``capabilities`` (``vCPUs``, ``MemoryGB``, ``GPUs``), ``locationInfo[].zones``
  (which zones have the size) less ``restrictions`` (``Location``: not offered to this
  subscription there; ``Zone``: not in those zones); ``LowPriorityCapable`` "False": no spot
  price, whatever the meters say. The GPU model is the size's family
  (catalog.FAMILIES): resource_skus gives only a count.

A size with zones becomes one row per zone (``<region>-<n>``: zonal VMs, which zonal managed
disks need); a size without zones one regional row (zone = region).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch import gpus
from gpuorch.provider.catalog import OfferRow

from .catalog import CATALOG


class PriceError(ValueError):
    """An answer without the shape the API documents."""


Prices = dict[tuple[str, str, bool], tuple[str, float]]  # (region, size, spot) -> (effective date, USD/h)


def retail_prices(items: Iterable[Mapping[str, Any]]) -> Prices:
    """Linux pay-as-you-go and spot prices per (region, size) from Retail Prices ``Items``."""
    out: Prices = {}
    for item in items:
        try:
            if item["serviceName"] != "Virtual Machines" or item["type"] != "Consumption":
                continue
            sku_name, product = str(item["skuName"]), str(item["productName"])
            if "Windows" in product or sku_name.endswith("Low Priority") or item["unitOfMeasure"] != "1 Hour":
                continue
            if item["currencyCode"] != "USD":
                raise PriceError(f"meter {item.get('meterId')}: prices in {item['currencyCode']}, not USD")
            key = (str(item["armRegionName"]), str(item["armSkuName"]), sku_name.endswith(" Spot"))
            when, price = str(item.get("effectiveStartDate") or ""), float(item["retailPrice"])
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, PriceError):
                raise
            raise PriceError(f"Retail Prices item {item.get('meterId') or item.get('skuId') or '?'}: missing or "
                             f"malformed {e}") from None
        if key not in out or when > out[key][0]:
            out[key] = (when, price)
    return out


def capability(sku: Mapping[str, Any], name: str) -> str | None:
    return next((str(c.get("value")) for c in sku.get("capabilities") or () if c.get("name") == name), None)


def zones_of(sku: Mapping[str, Any], region: str) -> list[str] | None:
    """The zones of ``region`` where the size can be had ([] for a regional-only size); None when
    it is not offered there at all (a ``Location`` restriction, or no locationInfo)."""
    info = next((i for i in sku.get("locationInfo") or () if str(i.get("location", "")).lower() == region), None)
    if info is None:
        return None
    zones = {str(z) for z in info.get("zones") or ()}
    for r in sku.get("restrictions") or ():
        where = r.get("restrictionInfo") or {}
        if r.get("type") == "Location" and region in [str(x).lower() for x in where.get("locations") or r.get("values")
                                                      or ()]:
            return None
        if r.get("type") == "Zone":
            zones -= {str(z) for z in where.get("zones") or ()}
    return sorted(zones)


def sku_rows(skus: Iterable[Mapping[str, Any]], regions: Iterable[str], prices: Prices) -> list[OfferRow]:
    """One row per (zone, GPU VM size) with an on-demand price; spot where a spot meter exists."""
    rule = CATALOG.billing
    rows: dict[tuple[str, str], OfferRow] = {}
    wanted = set(regions)
    for sku in skus:
        if sku.get("resourceType") != "virtualMachines":
            continue
        try:
            size = str(sku["name"])
            count = int(float(capability(sku, "GPUs") or 0))
            vcpus, memory = float(capability(sku, "vCPUs") or 0), float(capability(sku, "MemoryGB") or 0)
        except (KeyError, TypeError, ValueError) as e:
            raise PriceError(f"resource SKU {sku.get('name')!r}: malformed capabilities ({e})") from None
        family = CATALOG.family_of(size)
        spec = gpus.lookup(family.gpu) if family is not None else None
        if count <= 0 or spec is None:
            continue  # no GPU, or a GPU family gpuorch does not know
        for region in wanted:
            zones = zones_of(sku, region)
            on_demand = prices.get((region, size, False))
            if zones is None or on_demand is None:
                continue
            spot = prices.get((region, size, True))
            spot_ok = capability(sku, "LowPriorityCapable") != "False"  # Azure says a size cannot run as spot
            spot_price = spot[1] if spot is not None and spot_ok and spot[1] < on_demand[1] else None
            for zone in [f"{region}-{z}" for z in zones] or [region]:
                rows[(zone, size)] = OfferRow(
                    "azure", region, zone, size, spec.name, count, spec.usable, vcpus, memory, on_demand[1],
                    spot_price, rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(size, count), None)
    return [rows[k] for k in sorted(rows)]
