from __future__ import annotations

from typing import Any

import pytest

from gpuorch import gpus
from gpuorch.jobs.spec import JobSpec, parse_spec
from gpuorch.provider.port import Offer


def make_offer(instance: str, gpu: str | None, price: float, *, count: int = 1, spot: float | None = None,
               zone: str = "z1", region: str = "r1", provider: str = "aws", memory: float | None = None,
               bucket: str | None = None, granularity: int = 1, minimum: int = 60, link: str | None = None,
               vcpus: float = 8, ram: float = 64) -> Offer:  # fmt: skip
    spec = gpus.lookup(gpu) if gpu else None
    return Offer(
        provider=provider, region=region, zone=zone, instance_type=instance, gpu=spec.name if spec else None,
        gpu_count=count if spec else 0, gpu_memory_gib=memory if memory is not None else (spec.usable if spec else 0),
        vcpus=vcpus, memory_gib=ram, price_per_hour=price, spot_price_per_hour=spot, billing_granularity_s=granularity,
        min_billing_s=minimum, interconnect=link, interruption_bucket=bucket,
    )  # fmt: skip


def make_job(**fields: Any) -> JobSpec:
    return parse_spec({"name": "job", "run": "python train.py", **fields})


@pytest.fixture
def offer():
    return make_offer


@pytest.fixture
def job():
    return make_job
