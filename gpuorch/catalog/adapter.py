"""What an adapter declares about its catalog: its shipped rows, instance families and billing rule.

Each adapter has a stdlib-only ``catalog`` module holding one ``AdapterCatalog`` and registers it
under the entry-point group ``gpuorch.catalogs`` (``aws = "gpuorch_aws.catalog:CATALOG"``); the
core reads those (``gpuorch.catalog.registry``) to list offers, pick interconnects and bill,
without importing the adapter's SDK, pydantic or its provider class (``gpuorch offers`` starts
fast). Kept free of pydantic for the same reason. Adapters import these names through the kit
(``gpuorch.provider.catalog``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpuorch.money.billing import BillingRule

__all__ = ["AdapterCatalog", "BillingRule", "FabricKind", "Family", "Shape", "gpu_memory_mib", "price_or_none"]


# The network between instances of a family, as the multi-node runtime estimate reads it
# (gpuorch.sizing.fabric): InfiniBand, RDMA over Ethernet (RoCE, GCP's RDMA), AWS's EFA, GCP's
# GPUDirect-TCPX(O), or plain TCP over Ethernet.
FabricKind = Literal["infiniband", "rdma", "efa", "tcpx", "ethernet"]


@dataclass(frozen=True)
class Family:
    """An instance family carrying GPUs. ``link`` is the GPU-to-GPU path inside the node (none in
    use for one GPU); ``network_gbps`` the largest size's network between nodes, over ``fabric``
    (sources: docs/sizing.md, "Instance families"), 0 where the market publishes none."""

    provider: str
    pattern: str  # regular expression on the instance type
    gpu: str
    max_gpus: int
    link: str  # nvlink | pcie | infinity-fabric
    network_gbps: float
    fabric: FabricKind = "ethernet"


@dataclass(frozen=True)
class Shape:
    """What one instance type is, from the cloud's instance-type page: the row audit
    (``gpuorch.catalog.audit``) checks every catalog row of that type against it."""

    instance_type: str
    gpus: int
    vcpus: float
    memory_gib: float
    source: str = ""  # the page it is from


@dataclass(frozen=True)
class AdapterCatalog:
    """One adapter's catalog. ``rows``: its shipped catalog CSV (None: it builds its offers
    itself, as local and sim do). ``builder``: ``"module:function"`` rebuilding ``rows`` from
    the public data (``python -m gpuorch.catalog.snapshot``), taking the data folder.
    ``offers``: ``"module:function"`` taking ``(options, home)`` and returning what the provider
    class's ``catalog_offers`` returns for ``providers.<name>`` (which calls the same function), in
    a module lighter than the provider's: ``gpuorch.registry.offline_offers`` calls it instead of
    importing the class (``gpuorch offers`` starts fast). None: the class's ``catalog_offers``."""

    provider: str
    billing: BillingRule
    families: tuple[Family, ...] = ()
    rows: Path | None = None
    builder: str | None = None
    shapes: tuple[Shape, ...] = ()
    # What a job volume costs while it exists, USD per GiB-month (gpuorch.money.storage); None: not said.
    # ``storage_rates``: per disk type where the market has several; a type not listed (or none
    # given: the adapter's default type) costs ``storage_usd_per_gib_month``.
    storage_usd_per_gib_month: float | None = None
    storage_rates: tuple[tuple[str, float], ...] = ()
    offers: str | None = None

    def storage_rate(self, disk_type: str | None) -> float | None:
        return dict(self.storage_rates).get(disk_type or "", self.storage_usd_per_gib_month)

    def shape_of(self, instance_type: str) -> Shape | None:
        return next((s for s in self.shapes if s.instance_type == instance_type), None)

    def family_of(self, instance_type: str) -> Family | None:
        return next((f for f in self.families if re.match(f.pattern, instance_type)), None)

    def fabric_for(self, instance_type: str) -> tuple[str, float] | None:
        """(fabric kind, Gb/s per node) between instances of this type; None for an unknown family
        or one whose network is not published (0 Gb/s: sizing then assumes its unknown fabric)."""
        f = self.family_of(instance_type)
        return (f.fabric, f.network_gbps) if f and f.network_gbps > 0 else None

    def interconnect_for(self, instance_type: str, gpu_count: int) -> str | None:
        """The GPU-to-GPU link of a multi-GPU instance; None for one GPU or an unknown family."""
        if gpu_count <= 1:
            return None
        f = self.family_of(instance_type)
        return f.link if f else None


def price_or_none(text: str) -> float | None:
    """A price column of the public data: empty means "not published"."""
    return float(text) if text.strip() else None


def gpu_memory_mib(info: str) -> float:
    """Memory per GPU from the public data's ``GpuInfo`` column (a Python literal)."""
    return float(ast.literal_eval(info)["Gpus"][0]["MemoryInfo"]["SizeInMiB"])
