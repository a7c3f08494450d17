"""``gpuorch catalog refresh --provider azure``: sizes, capabilities and zones from the fake ARM's
resource_skus, prices (spot meters included) from a fake Retail Prices API (the API's shapes,
several pages), written as the catalog ``--catalog`` reads with provenance; refusals and
unparseable answers are one line and overwrite nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from azure_helpers import StaticToken, options
from azure_test_catalog import resource_sku
from fake_arm import FakeArm
from fake_prices import FakePrices, meter
from typer.testing import CliRunner

import gpuorch.cli  # noqa: F401 - registers the commands
from gpuorch.catalog import provenance
from gpuorch.cli.app import app
from gpuorch.provider.catalog import load_offers
from gpuorch_azure.catalog import CATALOG
from gpuorch_azure.pricing import retail_prices, zones_of

pytestmark = pytest.mark.azure
runner = CliRunner()
T4, T4_SPOT, A100, A100_SPOT = 0.526, 0.0526, 3.673, 0.40403


@pytest.fixture(scope="session")
def prices_server() -> Iterator[FakePrices]:
    fake = FakePrices()
    yield fake
    fake.close()


@pytest.fixture
def configured(arm: FakeArm, prices_server: FakePrices, _isolated_home: Path, monkeypatch) -> Path:
    import azure.identity

    # The daemon's credential chain is the SDK's; here it hands out the fake ARM's token.
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", lambda **kw: StaticToken(arm.token))
    prices_server.reset()
    prices_server.items = [
        meter("Standard_NC4as_T4_v3", "eastus", T4), meter("Standard_NC4as_T4_v3", "eastus", T4_SPOT, spot=True),
        meter("Standard_NC4as_T4_v3", "eastus", 0.9, windows=True),  # Windows: skipped
        meter("Standard_NC4as_T4_v3", "eastus", 0.1, low_priority=True),  # Batch low priority: skipped
        meter("Standard_NC4as_T4_v3", "eastus", 0.6, effective="2024-01-01T00:00:00Z"),  # older meter: superseded
        meter("Standard_NC24ads_A100_v4", "westus2", A100),
        meter("Standard_NC24ads_A100_v4", "westus2", A100_SPOT, spot=True),
        meter("Standard_D4s_v5", "eastus", 0.192),  # no GPU
    ]
    arm.resource_skus = [
        resource_sku("Standard_NC4as_T4_v3", "eastus", ["1", "2", "3"], 1, 4, 28,
                     [{"type": "Zone", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription",
                       "restrictionInfo": {"locations": ["eastus"], "zones": ["3"]}}]),
        resource_sku("Standard_NC24ads_A100_v4", "westus2", [], 1, 24, 220),
        resource_sku("Standard_D4s_v5", "eastus", ["1", "2", "3"], 0, 4, 16),
    ]
    arm.page_size = 1  # resource_skus paged by nextLink too
    cfg = {"providers": {"azure": {**options(arm), "prices_endpoint": prices_server.url}}}
    (_isolated_home / "config.yaml").write_text(yaml.safe_dump(cfg))
    return _isolated_home


def test_refresh_writes_zonal_rows_priced_from_every_page(configured: Path, prices_server: FakePrices) -> None:
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "azure", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    path = configured / "catalog" / "azure.csv"
    assert summary["path"] == str(path) and summary["regions"] == ["eastus", "westus2"]
    assert len(prices_server.requests) == 4, "eastus: 6 meters, 2 a page, 3 pages; westus2: 2 meters, 1 page"
    offers = {(o.zone, o.instance_type): o for o in load_offers(path)}
    assert set(offers) == {("eastus-1", "Standard_NC4as_T4_v3"), ("eastus-2", "Standard_NC4as_T4_v3"),
                           ("westus2", "Standard_NC24ads_A100_v4")}  # zone 3 restricted; A100 regional only
    t4 = offers[("eastus-1", "Standard_NC4as_T4_v3")]
    assert (t4.price_per_hour, t4.spot_price_per_hour, t4.gpu, t4.vcpus, t4.memory_gib) == (T4, T4_SPOT, "T4", 4, 28)
    a100 = offers[("westus2", "Standard_NC24ads_A100_v4")]
    family = CATALOG.family_of("Standard_NC24ads_A100_v4")  # resource_skus gives a count; the family the model
    assert family is not None and (a100.gpu, a100.price_per_hour, a100.spot_price_per_hour) == (family.gpu, A100,
                                                                                                A100_SPOT)
    assert (a100.billing_granularity_s, a100.min_billing_s) == (1, 300)
    record = provenance.read(path)
    assert record is not None and record["provider"] == "azure" and "Retail Prices" in record["source"]


def test_without_credentials_it_is_one_line_and_nothing_is_written(configured: Path, arm: FakeArm) -> None:
    arm.reject_tokens = True
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "azure"])
    assert r.exit_code == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: providers.azure: ") and "InvalidAuthenticationToken" in line
    assert not (configured / "catalog" / "azure.csv").exists()


def test_an_answer_that_does_not_parse_keeps_the_old_catalog(configured: Path, prices_server: FakePrices) -> None:
    assert runner.invoke(app, ["catalog", "refresh", "--provider", "azure"]).exit_code == 0
    path = configured / "catalog" / "azure.csv"
    before = path.read_text()
    prices_server.broken = True
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "azure"])
    assert r.exit_code == 2
    assert "an answer without Items" in r.stderr and r.stderr.strip().endswith("catalog left as it was")
    assert path.read_text() == before


def test_retail_items_without_a_price_do_not_parse_and_restrictions_remove_zones() -> None:
    item = meter("Standard_NC4as_T4_v3", "eastus", T4)
    del item["retailPrice"]
    with pytest.raises(ValueError, match="missing or malformed 'retailPrice'"):
        retail_prices([item])
    gone = resource_sku("Standard_NC4as_T4_v3", "eastus", ["1"], 1, 4, 28,
                        [{"type": "Location", "values": ["eastus"], "restrictionInfo": {"locations": ["eastus"]}}])
    assert zones_of(gone, "eastus") is None and zones_of(gone, "westus2") is None
    from gpuorch_azure.pricing import sku_rows

    prices = retail_prices([meter("Standard_NC4as_T4_v3", "eastus", T4),
                            meter("Standard_NC4as_T4_v3", "eastus", T4_SPOT, spot=True)])
    no_spot = resource_sku("Standard_NC4as_T4_v3", "eastus", [], 1, 4, 28)
    no_spot["capabilities"].append({"name": "LowPriorityCapable", "value": "False"})
    [row] = sku_rows([no_spot], ["eastus"], prices)
    assert (row.zone, row.price_per_hour, row.spot_price_per_hour) == ("eastus", T4, None)
