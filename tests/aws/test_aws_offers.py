"""Offers: EC2's GpuInfo and zone offerings, priced by a price source, spot from the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from moto_helpers import REGIONS, Refusals, static_prices

from gpuorch.errors import AuthError
from gpuorch.provider.port import Offer
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options
from gpuorch_aws.offers import build_offers, canonical_gpu

pytestmark = pytest.mark.aws


def by(offers: list[Offer], zone: str, instance_type: str) -> Offer:
    return next(o for o in offers if (o.zone, o.instance_type) == (zone, instance_type))


@pytest.mark.parametrize(("name", "mib", "expected"), [
    ("A100", 40960, "A100"), ("A100", 81920, "A100-80GB"), ("H100", 81920, "H100"), ("H200", 144384, "H200"),
    ("A10G", 22888, "A10G"), ("L4", 22888, "L4"), ("L40S", 45776, "L40S"), ("T4", 16384, "T4"),
    ("V100", 16384, "V100"), ("V100", 32768, "V100-32GB"), ("B200", 183359, "B200"),
    ("L4", 2861, None),  # an eighth of a card (g6f): not a GPU gpuorch can size for
    ("T4g", 16384, None), ("Radeon Pro V520", 8192, None),
])  # fmt: skip
def test_canonical_gpu(name: str, mib: int, expected: str | None) -> None:
    assert canonical_gpu(name, mib) == expected


def test_offers_come_from_gpu_info_priced_by_the_price_source(moto_offers: list[Offer]) -> None:
    g5 = by(moto_offers, "us-east-1a", "g5.xlarge")
    got = (g5.provider, g5.region, g5.gpu, g5.gpu_count, g5.vcpus, g5.memory_gib)
    assert got == ("aws", "us-east-1", "A10G", 1, 4, 16)
    assert g5.gpu_memory_gib == pytest.approx(22888 / 1024)
    assert (g5.price_per_hour, g5.billing_granularity_s, g5.min_billing_s) == (1.006, 1, 60)
    assert g5.interconnect is None  # one GPU: no link in use
    p4de = by(moto_offers, "us-east-1b", "p4de.24xlarge")
    assert (p4de.gpu, p4de.gpu_count, p4de.interconnect) == ("A100-80GB", 8, "nvlink")
    assert {o.instance_type for o in moto_offers if o.region == "us-west-2"} <= set(static_prices("us-west-2"))
    assert "t3.micro" not in {o.instance_type for o in moto_offers}  # priced, but no GPU
    zones = {o.zone for o in moto_offers if o.instance_type == "g5.xlarge" and o.region == "us-east-1"}
    assert zones >= {"us-east-1a", "us-east-1b"}
    assert all(o.spot_price_per_hour == 0.00001 for o in moto_offers)  # moto's only spot price


def test_spot_price_is_the_latest_per_zone(make_provider: Any) -> None:
    provider = make_provider(regions=["us-east-1"])
    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC)
    history = [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "g5.xlarge", "SpotPrice": "0.41", "Timestamp": t2},
        {"AvailabilityZone": "us-east-1a", "InstanceType": "g5.xlarge", "SpotPrice": "0.30", "Timestamp": t1},
        {"AvailabilityZone": "us-east-1c", "InstanceType": "g5.xlarge", "SpotPrice": "0.33", "Timestamp": t1},
    ]
    Refusals(provider.client("us-east-1"), "DescribeSpotPriceHistory", answer={"SpotPriceHistory": history})
    offers = provider.offers()
    assert by(offers, "us-east-1a", "g5.xlarge").spot_price_per_hour == 0.41
    assert by(offers, "us-east-1c", "g5.xlarge").spot_price_per_hour == 0.33
    assert by(offers, "us-east-1b", "g5.xlarge").spot_price_per_hour is None  # no spot price there: on-demand only


def test_default_prices_and_interruption_buckets_come_from_the_catalog(moto: None, session: Any) -> None:
    provider = AwsProvider(parse_options({"regions": ["us-east-1"]}), session=session)
    g5 = by(provider.offers(), "us-east-1a", "g5.xlarge")
    assert (g5.price_per_hour, g5.interruption_bucket) == (1.006, ">20%")


def test_offers_are_cached_for_their_ttl(moto: None, session: Any) -> None:
    now = [0.0]
    provider = AwsProvider(parse_options({"regions": ["us-east-1"], "offers_ttl_s": 600}), session=session,
                           prices=static_prices, monotonic=lambda: now[0])
    calls = Refusals(provider.client("us-east-1"), "DescribeInstanceTypes", when=lambda body: False)  # counts only
    first = provider.offers()
    now[0] = 599
    assert provider.offers() == first and calls.calls == 1
    now[0] = 600
    provider.offers()
    assert calls.calls == 2


def test_a_failing_region_is_left_out_unless_all_fail(make_provider: Any) -> None:
    provider = make_provider()
    Refusals(provider.client("us-west-2"), "DescribeInstanceTypes", "UnauthorizedOperation", 403)
    assert {o.region for o in provider.offers()} == {"us-east-1"}
    provider = make_provider()
    for region in REGIONS:
        Refusals(provider.client(region), "DescribeInstanceTypes", "UnauthorizedOperation", 403)
    with pytest.raises(AuthError, match="UnauthorizedOperation"):
        provider.offers()


def test_build_offers_keeps_configured_zones_and_sellable_types() -> None:
    gpu = {"Gpus": [{"Name": "L4", "Count": 1, "MemoryInfo": {"SizeInMiB": 22888}}]}
    types = [
        {"InstanceType": "g6.xlarge", "GpuInfo": gpu, "VCpuInfo": {"DefaultVCpus": 4},
         "MemoryInfo": {"SizeInMiB": 16384}, "SupportedUsageClasses": ["on-demand"]},
        {"InstanceType": "g6.blocks", "GpuInfo": gpu, "VCpuInfo": {"DefaultVCpus": 4},
         "MemoryInfo": {"SizeInMiB": 16384}, "SupportedUsageClasses": ["capacity-block"]},
    ]  # fmt: skip
    offerings = [{"InstanceType": t, "Location": z} for t in ("g6.xlarge", "g6.blocks") for z in ("r-1a", "r-1b")]
    spot = [{"AvailabilityZone": "r-1a", "InstanceType": "g6.xlarge", "SpotPrice": "0.3",
             "Timestamp": datetime(2026, 1, 1, tzinfo=UTC)}]
    offers = build_offers("r-1", types, offerings, spot, {"g6.xlarge": 0.8, "g6.blocks": 0.8}, zones={"r-1a"})
    got = [(o.zone, o.instance_type, o.gpu, o.spot_price_per_hour) for o in offers]
    assert got == [("r-1a", "g6.xlarge", "L4", None)]
