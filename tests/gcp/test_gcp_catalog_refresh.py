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
from gpuorch.clock import utcnow
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
    n1 = {**s, "description": "Preemptible N1 Predefined Instance Core running in Americas",  # older spot spelling
          "category": {"resource_family": "Compute", "resource_group": "N1Standard", "usage_type": "Preemptible"}}
    assert sku_prices([n1]) == {("core", "n1", "us-east4", True): 1.25}
    custom = {**n1, "description": "N1 Custom Instance Core running in Americas"}
    assert sku_prices([custom]) == {}


def test_offers_and_plan_say_how_old_the_prices_are(configured: Path) -> None:
    assert runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"]).exit_code == 0
    path = configured / "catalog" / "gcp.csv"
    fetched = provenance.read(path)["fetched_at"]  # type: ignore[index]
    data = json.loads(runner.invoke(app, ["offers", "--catalog", str(path), "--json"]).stdout)
    assert data["prices"]["as_of"] == fetched and data["prices"]["age_s"] >= 0
    assert "Cloud Billing Catalog" in data["prices"]["source"]
    text = runner.invoke(app, ["offers", "--catalog", str(path)]).stdout.splitlines()[-1]
    assert text.startswith(f"prices: gcp as of {fetched} (") and " old), from Compute Engine machineTypes" in text
    job = configured / "job.yaml"
    job.write_text("name: l4\nrun: x\nresources: {gpu: 'L4:1'}\n")
    planned = runner.invoke(app, ["plan", str(job), "--catalog", str(path)])
    assert planned.exit_code == 0 and planned.stdout.splitlines()[-1].startswith(f"prices: gcp as of {fetched}")
    default = json.loads(runner.invoke(app, ["offers", "--json"]).stdout)  # the configured gcp reads its refresh
    assert default["prices"]["as_of"] == fetched
    assert default["prices"]["line"].startswith(f"prices: gcp as of {fetched}")
    gcp_rows = {(o["zone"], o["instance_type"]) for o in default["offers"] if o["provider"] == "gcp"}
    assert gcp_rows == {(o.zone, o.instance_type) for o in load_offers(path)}
    path.unlink()
    shipped = json.loads(runner.invoke(app, ["offers", "--json"]).stdout)["prices"]
    assert shipped["as_of"] is None and "unknown age" in shipped["line"]


def test_the_daemons_refresh_feeds_offers_and_keeps_the_last_good_catalog(make_provider, configured: Path,
                                                                         billing: FakeBilling, fake: FakeGce) -> None:
    from datetime import timedelta

    from gpuorch.ops.catalog_refresh import CatalogRefresher

    provider = make_provider(home=configured, billing_endpoint=billing.url,
                             zones=["us-central1-a", "us-central1-b"])
    shipped = {(o.zone, o.instance_type): o.price_per_hour for o in provider.offers()}
    clock = [fake.now()]
    refresher = CatalogRefresher({"gcp": provider}, configured, 3600.0, lambda: clock[0])
    assert refresher.run_due() == ["gcp"]
    g2 = next(o for o in provider.offers() if (o.zone, o.instance_type) == ("us-central1-a", "g2-standard-4"))
    assert g2.price_per_hour == pytest.approx(4 * G2_CORE + 16 * G2_RAM + L4, abs=1e-6)
    assert g2.price_per_hour != shipped.get(("us-central1-a", "g2-standard-4"))
    good = (configured / "catalog" / "gcp.csv").read_text()
    assert refresher.run_due() == []  # not due again within the period
    billing.refuse_disabled()
    clock[0] += timedelta(hours=1)
    assert refresher.run_due() == [] and "Cloud Billing" in refresher.errors["gcp"]
    assert (configured / "catalog" / "gcp.csv").read_text() == good  # the last good catalog stays
    assert next(o for o in provider.offers() if o.instance_type == "g2-standard-4").price_per_hour == g2.price_per_hour


def test_the_daemons_refresh_thread_writes_the_catalog_and_stops_when_told(make_provider, configured: Path,
                                                                           billing: FakeBilling) -> None:
    import threading

    from gpuorch.ops.catalog_refresh import CatalogRefresher

    provider = make_provider(home=configured, billing_endpoint=billing.url, zones=["us-central1-a"])
    stop = threading.Event()
    thread = CatalogRefresher({"gcp": provider}, configured, 3600.0, utcnow).start(stop)
    assert thread is not None
    path = configured / "catalog" / "gcp.csv"
    for _ in range(600):  # waits for the first refresh (a condition, not a timing)
        if provenance.read(path) is not None:
            break
        stop.wait(0.05)
    stop.set()
    thread.join(timeout=30)
    assert provenance.read(path) is not None and not thread.is_alive()
    assert CatalogRefresher({}, configured, 3600.0, utcnow).start(stop) is None  # nothing to refresh: no thread


# N1 list prices of us-central1 (USD per vCPU-hour, GiB-hour, GPU-hour), as the catalog gives them.
N1_CORE, N1_RAM, T4, V100 = 0.031611, 0.004237, 0.350000, 2.480000
N1_CORE_SPOT, N1_RAM_SPOT, T4_SPOT, V100_SPOT = 0.006655, 0.000892, 0.069000, 0.496000


def accelerator_type(name: str, zone: str, max_cards: int) -> dict:
    base = "https://www.googleapis.com/compute/v1/projects/test-project/zones"
    return {"kind": "compute#acceleratorType", "name": name, "zone": f"{base}/{zone}",
            "description": name.upper(), "maximumCardsPerInstance": max_cards,
            "selfLink": f"{base}/{zone}/acceleratorTypes/{name}"}


@pytest.fixture
def with_n1(configured: Path, fake: FakeGce, billing: FakeBilling) -> Path:
    for zone in ("us-central1-a", "us-central1-b"):
        fake.machine_types += [
            {"kind": "compute#machineType", "name": name, "zone": zone, "guestCpus": cpus, "memoryMb": mb,
             "isSharedCpu": False, "description": f"{cpus} vCPUs"}
            for name, cpus, mb in (("n1-standard-4", 4, 15360), ("n1-standard-8", 8, 30720),
                                   ("n1-highmem-16", 16, 106496), ("n1-standard-96", 96, 368640))]
    fake.accelerator_types[:] = [
        accelerator_type("nvidia-tesla-t4", "us-central1-a", 4),
        accelerator_type("nvidia-tesla-v100", "us-central1-a", 8),
        accelerator_type("nvidia-l4", "us-central1-a", 8),  # G2's GPU: no N1 row
        accelerator_type("nvidia-tesla-p4", "us-central1-a", 4),  # gpuorch has no P4 entry: no row
        accelerator_type("nvidia-tesla-t4", "us-central1-b", 4),  # no V100 in -b
        accelerator_type("nvidia-tesla-t4", "europe-west4-a", 4),  # not configured
        accelerator_type("nvidia-tesla-v100", "europe-west4-a", 8),
    ]
    r, n1 = ["us-central1"], "N1Standard"  # the resource group the catalog gives N1's core and RAM SKUs
    billing.skus += [
        sku("0101-N1C", "N1 Predefined Instance Core running in Americas", n1, "OnDemand", r, N1_CORE),
        sku("0102-N1R", "N1 Predefined Instance Ram running in Americas", n1, "OnDemand", r, N1_RAM, "GiBy.h"),
        sku("0103-T4", "Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", r, T4),
        sku("0104-V100", "Nvidia Tesla V100 GPU running in Americas", "GPU", "OnDemand", r, V100),
        sku("0105-N1CS", "Spot Preemptible N1 Predefined Instance Core running in Americas", n1, "Preemptible",
            r, N1_CORE_SPOT),
        sku("0106-N1RS", "Spot Preemptible N1 Predefined Instance Ram running in Americas", n1, "Preemptible",
            r, N1_RAM_SPOT, "GiBy.h"),
        sku("0107-T4S", "Spot Preemptible Nvidia Tesla T4 GPU running in Americas", "GPU", "Preemptible", r, T4_SPOT),
        sku("0108-V100S", "Spot Preemptible Nvidia Tesla V100 GPU running in Americas", "GPU", "Preemptible", r,
            V100_SPOT),
        sku("0109-N1CU", "Custom Instance Core running in Americas", "CPU", "OnDemand", r, 0.033),  # skipped
    ]
    return configured


def test_refresh_prices_n1_vms_with_attached_gpus_where_the_zone_has_them(with_n1: Path, fake: FakeGce) -> None:
    from gpuorch.catalog.audit import audit_rows
    from gpuorch.catalog.rows import OfferRow

    r = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp", "--json"])
    assert r.exit_code == 0, r.output
    assert "audit" not in r.stderr.lower() and "fix" not in r.stderr
    pages = [p for m, p in fake.requests if p.endswith("/aggregated/acceleratorTypes")]
    assert len(pages) == 4, "7 accelerator types, 2 per page: every page read"
    path = with_n1 / "catalog" / "gcp.csv"
    offers = {(o.zone, o.instance_type): o for o in load_offers(path)}
    t4 = offers[("us-central1-a", "n1-standard-8+nvidia-tesla-t4x1")]
    assert (t4.gpu, t4.gpu_count, t4.vcpus, t4.memory_gib, t4.gpu_memory_gib) == ("T4", 1, 8, 30, 16)
    assert t4.price_per_hour == pytest.approx(8 * N1_CORE + 30 * N1_RAM + T4, abs=1e-6)
    assert t4.spot_price_per_hour == pytest.approx(8 * N1_CORE_SPOT + 30 * N1_RAM_SPOT + T4_SPOT, abs=1e-6)
    v100 = offers[("us-central1-a", "n1-highmem-16+nvidia-tesla-v100x2")]
    assert (v100.gpu, v100.gpu_count, v100.vcpus, v100.memory_gib) == ("V100", 2, 16, 104)
    assert v100.price_per_hour == pytest.approx(16 * N1_CORE + 104 * N1_RAM + 2 * V100, abs=1e-6)
    assert v100.spot_price_per_hour == pytest.approx(16 * N1_CORE_SPOT + 104 * N1_RAM_SPOT + 2 * V100_SPOT, abs=1e-6)
    assert v100.interconnect == "nvlink" and offers[("us-central1-a", "n1-standard-8+nvidia-tesla-t4x2")] \
        .interconnect == "pcie"
    n1 = {k for k in offers if k[1].startswith("n1-")}
    # GCE's vCPU limits per GPU and count: 1 V100 takes at most 12 vCPUs, 1 or 2 T4 at most 48
    assert ("us-central1-a", "n1-standard-8+nvidia-tesla-v100x1") in n1
    assert ("us-central1-a", "n1-highmem-16+nvidia-tesla-v100x1") not in n1
    assert ("us-central1-a", "n1-standard-96+nvidia-tesla-t4x2") not in n1
    assert ("us-central1-a", "n1-standard-96+nvidia-tesla-t4x4") in n1
    assert ("us-central1-a", "n1-standard-96+nvidia-tesla-v100x8") in n1
    assert not any(t.endswith("t4x8") for _, t in n1), "T4: at most 4 per VM (maximumCardsPerInstance)"
    assert {z for z, t in n1 if "v100" in t} == {"us-central1-a"}, "V100 rows only where the zone has V100s"
    assert {z for z, t in n1 if "t4" in t} == {"us-central1-a", "us-central1-b"}
    assert not any("p4x" in t or "l4x" in t for _, t in n1)
    assert audit_rows([OfferRow(**o.model_dump(include=set(OfferRow._fields))) for o in offers.values()]) == []
    assert {(o.zone, o.instance_type) for o in load_offers(path)} >= {("us-central1-a", "g2-standard-4")}
    listed = runner.invoke(app, ["offers", "--catalog", str(path), "--gpu", "V100", "--json"])
    assert listed.exit_code == 0 and "n1-standard-8+nvidia-tesla-v100x1" in listed.stdout


def test_an_n1_offer_launches_as_its_machine_type_with_the_gpus_attached_and_reads_back_as_offered() -> None:
    from gpuorch.provider import Offer
    from gpuorch.provider.port import LaunchRequest
    from gpuorch_gcp.parse import instance_type_of
    from gpuorch_gcp.requests import instance_body

    offer = Offer(provider="gcp", region="us-central1", zone="us-central1-a",
                  instance_type="n1-standard-8+nvidia-tesla-t4x2", gpu="T4", gpu_count=2, gpu_memory_gib=16,
                  vcpus=8, memory_gib=30, price_per_hour=1.0, billing_granularity_s=1, min_billing_s=60)
    body = instance_body(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False),
                         zone="us-central1-a", image="projects/x/global/images/y")
    assert body["machine_type"] == "zones/us-central1-a/machineTypes/n1-standard-8"
    assert body["guest_accelerators"] == [
        {"accelerator_type": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4", "accelerator_count": 2}]
    read = {"machine_type": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/"
                            "n1-standard-8",
            "guest_accelerators": [{"accelerator_type": "https://www.googleapis.com/compute/v1/projects/p/zones/"
                                                        "us-central1-a/acceleratorTypes/nvidia-tesla-t4",
                                    "accelerator_count": 2}]}
    assert instance_type_of(read) == offer.instance_type
    g2 = {"machine_type": "zones/us-central1-a/machineTypes/g2-standard-4",
          "guest_accelerators": [{"accelerator_type": "zones/us-central1-a/acceleratorTypes/nvidia-l4",
                                  "accelerator_count": 1}]}
    assert instance_type_of(g2) == "g2-standard-4"  # GPUs bundled with the machine type: its own name


def test_a_refreshed_n1_offer_launches_on_the_fake_with_its_gpus_and_reads_back_as_offered(
        with_n1: Path, make_provider, fake: FakeGce, billing: FakeBilling) -> None:
    from gpuorch.provider.port import LaunchRequest

    assert runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"]).exit_code == 0
    provider = make_provider(home=with_n1, billing_endpoint=billing.url, zones=["us-central1-a", "us-central1-b"])
    offer = next(o for o in provider.offers() if o.instance_type == "n1-standard-4+nvidia-tesla-v100x1")
    inst = provider.launch(LaunchRequest(job_id=3, attempt=1, offer=offer, spot=True, owner="c0ffee000001"))
    [stored] = fake.instances.values()
    assert stored["machineType"].endswith("/zones/us-central1-a/machineTypes/n1-standard-4")
    assert stored["guestAccelerators"] == [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-v100",
                                            "acceleratorCount": 1}]
    assert (inst.zone, inst.instance_type) == (offer.zone, offer.instance_type)
    assert provider.get(inst.id).instance_type == offer.instance_type


def test_a_refused_accelerator_type_listing_is_one_line_naming_the_permission(with_n1: Path, fake: FakeGce) -> None:
    fake.fail_http("GET", "/aggregated/acceleratorTypes$", 403, "forbidden",
                   message="Required 'compute.acceleratorTypes.list' permission for 'projects/test-project'")
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp"])
    assert r.exit_code == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert "listing machine or accelerator types was refused" in line and "compute.acceleratorTypes.list" in line
    assert not (with_n1 / "catalog" / "gcp.csv").exists()
