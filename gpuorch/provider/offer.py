"""The port's base model and its ``Offer``, in a module of their own: the catalog's typed offers
(``gpuorch.provider.catalog.load_offers``) are built from it without importing the whole port."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Model", "Offer"]


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Offer(Model):
    """One purchasable configuration: an instance type in a zone, on-demand and maybe spot."""

    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str | None  # canonical name from gpuorch.gpus; None for CPU-only
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0  # per GPU
    vcpus: float = 0
    memory_gib: float = 0
    price_per_hour: float  # on-demand, USD
    spot_price_per_hour: float | None = None  # None: no spot offering
    billing_granularity_s: int = 1
    min_billing_s: int = 60
    interconnect: str | None = None  # "nvlink", "pcie", ...
    interruption_bucket: str | None = None  # AWS advisor style: "<5%", ..., ">20%"
    # This offer's own volume storage rate, USD per GiB-month, where the market prices storage per
    # host (Vast's ``storage_cost``); None: the provider's catalog rate (``AdapterCatalog.storage_rate``).
    storage_usd_per_gib_month: float | None = None

    def price(self, spot: bool) -> float:
        if spot:
            if self.spot_price_per_hour is None:
                raise ValueError(f"{self.instance_type} in {self.zone} has no spot offering")
            return self.spot_price_per_hour
        return self.price_per_hour
