"""Where the Azure adapter's prices come from. gpuorch ships none (no first-party copy of Azure's
per-size prices could be cited: docs/catalog.md, "Sources"), so the adapter starts without a
catalog and sells nothing until a Retail Prices refresh (or a user's ``catalog:``) gives it one;
the tests' own catalog (``azure_test_catalog``) is made-up test data."""

from __future__ import annotations

from pathlib import Path

import azure_test_catalog
import pytest
from azure_helpers import REGIONS, StaticToken, options
from fake_arm import FakeArm

import gpuorch_azure
from gpuorch.catalog import load_rows
from gpuorch.catalog.audit import audit_rows
from gpuorch.catalog.registry import catalogs
from gpuorch.errors import UserInputError
from gpuorch_azure import AzureProvider

pytestmark = pytest.mark.azure


def test_nothing_is_shipped_for_azure():
    c = catalogs()["azure"]
    assert c.rows is None and c.builder is None and c.shapes  # the sizes' shapes stay: Azure's VM-size pages
    assert not [r for r in load_rows() if r.provider == "azure"]
    assert not list((Path(gpuorch_azure.__file__).parent / "data").rglob("*.csv"))


def test_the_test_catalog_file_is_the_test_offers_and_passes_the_row_audit():
    assert azure_test_catalog.FILE.read_text() == azure_test_catalog.file_text()
    rows = load_rows(azure_test_catalog.FILE)
    assert [r.instance_type for r in rows] == [o.instance_type for o in azure_test_catalog.offers()]
    assert not [f for f in audit_rows(rows) if f.severity == "error"]
    assert {r.gpu for r in rows} == {"T4", "A100-PCIE-80GB", "H100"}


def test_without_a_price_catalog_it_starts_with_no_offers_and_says_how_to_get_them(
        arm: FakeArm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    """gpuorch ships no Azure prices: before the first Retail Prices refresh the adapter starts
    (the daemon's refresh runs at start), sells nothing, and its log says where prices come from."""
    import gpuorch_azure.calls as calls

    real = calls.Arm.__init__
    monkeypatch.setattr(calls.Arm, "__init__",
                        lambda self, opts, *, credential=None, **kw: real(self, opts, credential=StaticToken(arm.token),
                                                                          **kw))
    with caplog.at_level("WARNING", logger="gpuorch.azure"):
        p = AzureProvider.from_config(options(arm), tmp_path)
    assert p.offers() == [] and AzureProvider.catalog_offers(options(arm), tmp_path) == []
    p.close()
    assert "no Azure prices yet" in caplog.text and "gpuorch catalog refresh --provider azure" in caplog.text
    # a catalog the user names is held to the regions as a refreshed one is
    empty = tmp_path / "empty.csv"
    empty.write_text(azure_test_catalog.FILE.read_text().splitlines()[0] + "\n")
    with pytest.raises(UserInputError, match=r"^providers\.azure\.regions: the catalog has no Azure offer"):
        AzureProvider.from_config(options(arm, catalog=str(empty)), tmp_path)


def test_catalog_offers_are_the_configured_regions_azure_rows(arm: FakeArm, tmp_path: Path):
    azure_test_catalog.write(tmp_path)
    offers = AzureProvider.catalog_offers(options(arm), tmp_path)
    assert offers and {o.provider for o in offers} == {"azure"} and {o.region for o in offers} == set(REGIONS)
    assert {o.instance_type for o in offers} >= {"Standard_NC4as_T4_v3", "Standard_NC24ads_A100_v4"}
    assert offers == [o for o in azure_test_catalog.offers() if o.region in REGIONS]


def test_offers_and_plan_say_azure_has_no_prices_until_a_refresh_then_read_it(arm: FakeArm, _isolated_home: Path):
    import json

    import yaml
    from typer.testing import CliRunner

    import gpuorch.cli  # noqa: F401 - registers the commands
    from gpuorch.cli.app import app

    runner = CliRunner()
    (_isolated_home / "config.yaml").write_text(yaml.safe_dump({"providers": {"azure": options(arm)}}))
    r = runner.invoke(app, ["offers", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["count"] == 0
    assert "prices: none for azure until a refresh" in json.loads(r.stdout)["prices"]["line"]
    r = runner.invoke(app, ["offers", "--price-list", "--provider", "azure"])
    assert r.exit_code == 2 and r.stderr.startswith("error: --provider: no azure offers in the shipped price list (")
    assert "gpuorch ships no azure prices; `gpuorch catalog refresh --provider azure` fetches them" in r.stderr
    job = _isolated_home / "job.yaml"
    job.write_text("name: x\nrun: echo hi\nresources: {gpu: 'A100:1'}\n")
    r = runner.invoke(app, ["plan", str(job)])
    assert r.exit_code == 2 and "the providers list no offers" in r.stderr and "gpuorch catalog refresh" in r.stderr
    azure_test_catalog.write(_isolated_home)  # as a refresh leaves it
    assert runner.invoke(app, ["plan", str(job)]).exit_code == 0
    data = json.loads(runner.invoke(app, ["offers", "--provider", "azure", "--json"]).stdout)
    assert data["count"] == len([o for o in azure_test_catalog.offers() if o.region in REGIONS])
    assert data["prices"]["catalogs"][0]["source"] == azure_test_catalog.SOURCE
