"""Live GCP offers from public list prices: Compute Engine's machine types (with their bundled
GPUs) priced from the Cloud Billing Catalog's SKUs. Pure functions over the APIs' dict forms
(``to_dict``: snake_case), unit-tested alone; ``refresh.py`` makes the calls.

How the catalog prices a GPU VM (the same rule as the shipped snapshot, snapshot.py): host
plus GPUs. The host is vCPUs x the family's "Instance Core" SKU plus GiB x its "Instance Ram"
SKU; the GPUs are count x the GPU's SKU. Spot prices are the ``Preemptible`` usage type (the
"Spot Preemptible ..." SKUs); on-demand ``OnDemand``. Each SKU lists the regions it applies to
(``service_regions``); its price is the first tier's ``unit_price`` (units + nanos, USD).

Machine types come from ``machineTypes.aggregatedList``: one per zone that sells it, with
``guest_cpus``, ``memory_mb`` and, for the families that come with GPUs (A2, A3, A4, G2), their
``accelerators``. N1 VMs take attached GPUs instead: ``acceleratorTypes.aggregatedList`` says
which GPU models a zone has (``name`` ``nvidia-tesla-t4``, ``maximum_cards_per_instance``), and
each N1 size GCE allows with that GPU and count (``catalog.N1_GPU_LIMITS``) that the zone's
machine types list is a row: the "N1 Predefined Instance Core/Ram" SKUs plus the GPU's
("Nvidia Tesla T4 GPU running in Americas"). SKU descriptions name families and GPUs in words
("G2 Instance Core running in Americas", "Spot Preemptible Nvidia H100 80GB Mega GPU running in
Virginia"); the spellings were checked against gpuhunt's reading of the same API (dstack's price
catalog).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch import gpus
from gpuorch.provider.catalog import OfferRow

from .catalog import CATALOG, n1_instance_type, n1_shapes
from .names import region_of

COMPUTE_SERVICE = "services/6F81-5844-456A"  # Compute Engine in the Cloud Billing Catalog
# GCE accelerator type -> gpuorch's GPU name.
GPU_OF_ACCELERATOR = {
    "nvidia-tesla-t4": "T4", "nvidia-tesla-v100": "V100", "nvidia-tesla-p100": "P100", "nvidia-tesla-p4": "P4",
    "nvidia-l4": "L4", "nvidia-tesla-a100": "A100", "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100", "nvidia-h100-mega-80gb": "H100", "nvidia-h200-141gb": "H200", "nvidia-b200": "B200",
}  # fmt: skip
# A GPU SKU's description, normalised (``nvidia-tesla-a100-80gb``) -> its accelerator type.
_GPU_SKU_ALIASES = {"nvidia-tesla-a100-80gb": "nvidia-a100-80gb", "nvidia-h100-80gb-mega": "nvidia-h100-mega-80gb"}
# Machine families whose Core/Ram SKUs are not named after their first token.
_FAMILY_OF_PREFIX = {"a3-megagpu": "a3plus", "a3-ultragpu": "a3ultra", "a4x-highgpu": "a4x"}
_SKIP = ("sole tenancy", "reserved", "premium", "custom", "commitment", "suspended", "dws", "calendar", "flex")
# Spot SKUs are "Spot Preemptible ..." today, "Preemptible ..." in older listings: both read.
_GPU_SKU = re.compile(r"(?:(?:spot )?preemptible )?(?P<name>nvidia .+?) gpu\b", re.IGNORECASE)
# "G2 Instance Core ...", "N1 Predefined Instance Ram ..." (N1's predefined sizes; Custom is skipped)
_HOST_SKU = re.compile(
    r"(?:(?:spot )?preemptible )?(?P<family>[a-z]\w*?)(?: predefined)? ?instance (?P<what>core|ram)\b", re.IGNORECASE)


class SkuError(ValueError):
    """A SKU (or machine type) that does not have the shape the catalog API documents."""


def unit_price(sku: Mapping[str, Any]) -> float:
    """The SKU's first-tier price in USD per unit (hour, or GiB-hour)."""
    try:
        rates = sku["pricing_info"][0]["pricing_expression"]["tiered_rates"]
        first = min(rates, key=lambda r: float(r.get("start_usage_amount") or 0))["unit_price"]
        if first.get("currency_code", "USD") != "USD":
            raise SkuError(f"SKU {sku.get('sku_id')}: prices in {first['currency_code']}, not USD")
        return int(first.get("units") or 0) + int(first.get("nanos") or 0) / 1e9
    except (KeyError, IndexError, TypeError, ValueError) as e:
        if isinstance(e, SkuError):
            raise
        raise SkuError(f"SKU {sku.get('sku_id') or sku.get('name') or '?'}: no first-tier unit_price ({e!r})") from None


Prices = dict[tuple[str, str, str, bool], float]  # (kind, key, region, spot) -> USD per unit; kind gpu/core/ram


def sku_prices(skus: Iterable[Mapping[str, Any]]) -> Prices:
    """Core, RAM and GPU prices per region and market from Compute Engine's SKUs; other SKUs
    (disks, licences, commitments, sole tenancy) are skipped. SkuError for a priced SKU of the
    right kind that does not parse."""
    out: Prices = {}
    for sku in skus:
        category = sku.get("category") or {}
        usage = category.get("usage_type")
        if category.get("resource_family") != "Compute" or usage not in ("OnDemand", "Preemptible"):
            continue
        desc = str(sku.get("description") or "")
        if any(word in desc.lower() for word in _SKIP):
            continue
        group = category.get("resource_group")
        if group == "GPU" and (m := _GPU_SKU.match(desc)):
            key = m["name"].lower().replace(" ", "-")
            kind, key = "gpu", _GPU_SKU_ALIASES.get(key, key)
        elif m := _HOST_SKU.match(desc):
            kind, key = m["what"].lower(), m["family"].lower()
        else:
            continue
        price = unit_price(sku)
        for region in sku.get("service_regions") or ():
            out[(kind, key, str(region), usage == "Preemptible")] = price
    return out


def family_key(machine_type: str) -> str:
    """The family a machine type's Core and Ram SKUs are named after (``a3-highgpu-8g`` -> ``a3``)."""
    for prefix, family in _FAMILY_OF_PREFIX.items():
        if machine_type.startswith(prefix + "-"):
            return family
    return machine_type.split("-", 1)[0]


def vm_price(prices: Prices, region: str, family: str, accel: str, vcpus: float, memory_gib: float, count: int,
             *, spot: bool) -> float | None:
    """Host plus GPUs in ``region``'s market; None when a part has no price there."""
    core, ram = prices.get(("core", family, region, spot)), prices.get(("ram", family, region, spot))
    per_gpu = prices.get(("gpu", accel, region, spot))
    if core is None or ram is None or per_gpu is None:
        return None
    return round(vcpus * core + memory_gib * ram + count * per_gpu, 6)


def machine_rows(machine_types: Iterable[Mapping[str, Any]], prices: Prices) -> list[OfferRow]:
    """One row per (zone, GPU machine type) whose host and GPUs have an on-demand price in its
    region; spot where all three parts have a spot price. SkuError for a malformed machine type."""
    rule = CATALOG.billing
    rows: dict[tuple[str, str], OfferRow] = {}
    for mt in machine_types:
        accels = mt.get("accelerators") or ()
        if not accels:
            continue
        try:
            name, zone = str(mt["name"]), str(mt["zone"]).rstrip("/").rsplit("/", 1)[-1]
            vcpus, memory = float(mt["guest_cpus"]), float(mt["memory_mb"]) / 1024
            accel, count = str(accels[0]["guest_accelerator_type"]), int(accels[0]["guest_accelerator_count"])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise SkuError(f"machine type {mt.get('name')!r}: missing or malformed {e}") from None
        gpu = GPU_OF_ACCELERATOR.get(accel)
        spec = gpus.lookup(gpu) if gpu else None
        if spec is None or count <= 0:
            continue  # a GPU gpuorch has no entry for
        region, family = region_of(zone), family_key(name)

        on_demand = vm_price(prices, region, family, accel, vcpus, memory, count, spot=False)
        if on_demand is None:
            continue
        rows[(zone, name)] = OfferRow(
            "gcp", region, zone, name, gpu, count, spec.memory_gib, vcpus, round(memory, 3), on_demand,
            vm_price(prices, region, family, accel, vcpus, memory, count, spot=True),
            rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(name, count), None)
    return [rows[k] for k in sorted(rows)]


def n1_rows(machine_types: Iterable[Mapping[str, Any]], accelerator_types: Iterable[Mapping[str, Any]],
            prices: Prices) -> list[OfferRow]:
    """One row per (zone, N1 size, GPU, count) that GCE allows (``catalog.N1_GPU_LIMITS``, at
    most the zone's ``maximum_cards_per_instance``), where the zone lists both the accelerator
    type and the N1 machine type, priced as N1 host plus GPUs; the host's vCPUs and RAM are the
    zone's machine type's. SkuError for a malformed accelerator or machine type."""
    rule = CATALOG.billing
    hosts: dict[tuple[str, str], tuple[float, float]] = {}  # (zone, machine type) -> (vCPUs, GiB)
    for mt in machine_types:
        if not str(mt.get("name", "")).startswith("n1-"):
            continue
        try:
            zone = str(mt["zone"]).rstrip("/").rsplit("/", 1)[-1]
            hosts[(zone, str(mt["name"]))] = float(mt["guest_cpus"]), float(mt["memory_mb"]) / 1024
        except (KeyError, TypeError, ValueError) as e:
            raise SkuError(f"machine type {mt.get('name')!r}: missing or malformed {e}") from None
    shapes = n1_shapes()
    rows: dict[tuple[str, str], OfferRow] = {}
    for at in accelerator_types:
        try:
            accel, zone = str(at["name"]), str(at["zone"]).rstrip("/").rsplit("/", 1)[-1]
            max_cards = int(at.get("maximum_cards_per_instance") or 0)
        except (KeyError, TypeError, ValueError) as e:
            raise SkuError(f"accelerator type {at.get('name')!r}: missing or malformed {e}") from None
        gpu = GPU_OF_ACCELERATOR.get(accel)
        spec = gpus.lookup(gpu) if gpu else None
        if spec is None:
            continue  # a GPU gpuorch has no entry for (P100, P4 today)
        region = region_of(zone)
        for machine, shape_accel, count, _, _ in shapes:
            host = hosts.get((zone, machine))
            if shape_accel != accel or count > max_cards or host is None:
                continue
            vcpus, memory = host
            on_demand = vm_price(prices, region, "n1", accel, vcpus, memory, count, spot=False)
            if on_demand is None:
                continue
            name = n1_instance_type(machine, accel, count)
            rows[(zone, name)] = OfferRow(
                "gcp", region, zone, name, gpu, count, spec.memory_gib, vcpus, round(memory, 3), on_demand,
                vm_price(prices, region, "n1", accel, vcpus, memory, count, spot=True),
                rule.increment_s, rule.minimum_s, CATALOG.interconnect_for(name, count), None)
    return [rows[k] for k in sorted(rows)]
