"""``gpuorch catalog refresh --provider gcp``: machine types from the fake GCE, prices from the fake
Cloud Billing Catalog (real response shapes, several pages), written as the catalog ``--catalog``
reads, with provenance; refusals and unparseable answers are one line and overwrite nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_billing import FakeBilling, sku
from fake_gce import FakeGce
from typer.testing import CliRunner

import gpuorch.cli  # noqa: F401 - registers the commands
from gpuorch.catalog import provenance
from gpuorch.cli.app import app
from gpuorch.provider.catalog import load_offers
from gpuorch_gcp.pricing import sku_prices, unit_price

pytestmark = pytest.mark.gcp
runner = CliRunner()
# Public list prices of us-central1 (USD per hour; RAM per GiB-hour), as the catalog gives them.
G2_CORE, G2_RAM, L4 = 0.024988, 0.002927, 0.560000
G2_CORE_SPOT, G2_RAM_SPOT, L4_SPOT = 0.009995, 0.001171, 0.224000
A3_CORE, A3_RAM, H100 = 0.021970, 0.002945, 9.796550


@pytest.fixture(scope="session")
def billing_server() -> Iterator[FakeBilling]:
    fake = FakeBilling()
    yield fake
    fake.close()


@pytest.fixture
def billing(billing_server: FakeBilling) -> FakeBilling:
    billing_server.reset()
    r = ["us-central1"]
    billing_server.skus = [
        sku("0001-G2C", "G2 Instance Core running in Americas", "CPU", "OnDemand", r, G2_CORE),
        sku("0002-G2R", "G2 Instance Ram running in Americas", "RAM", "OnDemand", r, G2_RAM, "GiBy.h"),
        sku("0003-L4", "Nvidia L4 GPU running in Americas", "GPU", "OnDemand", r, L4),
        sku("0004-G2CS", "Spot Preemptible G2 Instance Core running in Americas", "CPU", "Preemptible", r,
            G2_CORE_SPOT),
        sku("0005-G2RS", "Spot Preemptible G2 Instance Ram running in Americas", "RAM", "Preemptible", r,
            G2_RAM_SPOT, "GiBy.h"),
        sku("0006-L4S", "Spot Preemptible Nvidia L4 GPU running in Americas", "GPU", "Preemptible", r, L4_SPOT),
        sku("0007-A3C", "A3 Instance Core running in Americas", "CPU", "OnDemand", r, A3_CORE),
        sku("0008-A3R", "A3 Instance Ram running in Americas", "RAM", "OnDemand", r, A3_RAM, "GiBy.h"),
        sku("0009-H100", "Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", r, H100),
        sku("0010-PD", "Balanced PD Capacity in Iowa", "SSD", "OnDemand", r, 0.1, "GiBy.mo"),  # not compute: skipped
        sku("0011-CUD", "Commitment v1: G2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", r, 0.015),
    ]
    return billing_server


def machine_type(name: str, zone: str, cpus: int, memory_mb: int, accel: str, count: int) -> dict:
    return {"kind": "compute#machineType", "name": name, "zone": zone, "guestCpus": cpus, "memoryMb": memory_mb,
            "description": f"{cpus} vCPUs, {memory_mb // 1024} GB RAM", "isSharedCpu": False,
            "accelerators": [{"guestAcceleratorType": accel, "guestAcceleratorCount": count}]}


@pytest.fixture
def configured(fake: FakeGce, billing: FakeBilling, _isolated_home: Path) -> Path:
    fake.machine_types[:] = [
        machine_type("g2-standard-4", "us-central1-a", 4, 16384, "nvidia-l4", 1),
        machine_type("g2-standard-4", "us-central1-b", 4, 16384, "nvidia-l4", 1),
        machine_type("a3-highgpu-8g", "us-central1-a", 208, 1916928, "nvidia-h100-80gb", 8),
        machine_type("g2-standard-4", "europe-west4-a", 4, 16384, "nvidia-l4", 1),  # not configured: dropped
        {"kind": "compute#machineType", "name": "n2-standard-4", "zone": "us-central1-a", "guestCpus": 4,
         "memoryMb": 16384},  # no GPU
    ]
    (_isolated_home / "config.yaml").write_text(
        "providers:\n  gcp:\n    project: test-project\n    zones: [us-central1-a, us-central1-b]\n"
        f"    endpoint: {fake.url}\n    billing_endpoint: {billing.url}\n")
    return _isolated_home


def test_refresh_prices_gpu_vms_as_host_plus_gpus_from_every_page(configured: Path, billing: FakeBilling) -> None:
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    path = configured / "catalog" / "gcp.csv"
    assert summary["path"] == str(path) and summary["regions"] == ["us-central1"]
    assert len(billing.requests) == 4, "11 SKUs, 3 per page: every page read"
    offers = {(o.zone, o.instance_type): o for o in load_offers(path)}
    assert set(offers) == {("us-central1-a", "g2-standard-4"), ("us-central1-b", "g2-standard-4"),
                           ("us-central1-a", "a3-highgpu-8g")}
    g2 = offers[("us-central1-a", "g2-standard-4")]
    assert g2.price_per_hour == pytest.approx(4 * G2_CORE + 16 * G2_RAM + L4, abs=1e-6)
    assert g2.spot_price_per_hour == pytest.approx(4 * G2_CORE_SPOT + 16 * G2_RAM_SPOT + L4_SPOT, abs=1e-6)
    assert (g2.gpu, g2.gpu_count, g2.billing_granularity_s, g2.min_billing_s) == ("L4", 1, 1, 60)
    a3 = offers[("us-central1-a", "a3-highgpu-8g")]
    assert a3.price_per_hour == pytest.approx(208 * A3_CORE + 1872 * A3_RAM + 8 * H100, abs=1e-6)
    assert a3.spot_price_per_hour is None  # no spot SKU listed for A3 here
    assert a3.interconnect == "nvlink"
    record = provenance.read(path)
    assert record is not None and record["provider"] == "gcp" and "Cloud Billing Catalog" in record["source"]
    assert record["offers"] == 3 and record["fetched_at"] == summary["fetched_at"]
    listed = runner.invoke(app, ["offers", "--catalog", str(path), "--gpu", "L4", "--json"])
    assert listed.exit_code == 0 and "g2-standard-4" in listed.stdout


def test_a_project_without_the_billing_api_is_one_line_naming_it_and_keeps_the_old_catalog(
        configured: Path, billing: FakeBilling) -> None:
    assert runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"]).exit_code == 0
    path = configured / "catalog" / "gcp.csv"
    before = path.read_text()
    billing.refuse_disabled()
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"])
    assert r.exit_code == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: gcp: gcp catalog refresh: the Cloud Billing Catalog refused the price listing: "
                           "enable the Cloud Billing API")
    assert "gcloud services enable cloudbilling.googleapis.com" in line and line.endswith("catalog left as it was")
    assert path.read_text() == before


def test_an_answer_that_does_not_parse_overwrites_nothing(configured: Path, billing: FakeBilling) -> None:
    assert runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"]).exit_code == 0
    path = configured / "catalog" / "gcp.csv"
    before, record = path.read_text(), provenance.read(path)
    billing.skus[2]["pricingInfo"] = []  # the L4 SKU without a price
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"])
    assert r.exit_code == 2
    assert "an answer did not parse: SKU 0003-L4: no first-tier unit_price" in r.stderr
    assert path.read_text() == before and provenance.read(path) == record


def test_sku_prices_reads_units_and_nanos_and_skips_what_is_not_a_vm_part() -> None:
    s = {"sku_id": "x", "description": "Nvidia L4 GPU running in Americas", "service_regions": ["us-east4"],
         "category": {"resource_family": "Compute", "resource_group": "GPU", "usage_type": "OnDemand"},
         "pricing_info": [{"pricing_expression": {"tiered_rates": [
             {"start_usage_amount": 0, "unit_price": {"currency_code": "USD", "units": "1", "nanos": 250000000}}]}}]}
    assert unit_price(s) == 1.25
    assert sku_prices([s]) == {("gpu", "nvidia-l4", "us-east4", False): 1.25}
    reserved = {**s, "description": "Reserved Nvidia L4 GPU in Americas"}
    assert sku_prices([reserved]) == {}
