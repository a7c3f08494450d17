"""``gpuorch catalog refresh --provider aws`` writes a catalog that ``--catalog`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuorch.cli  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.provider.catalog import load_offers

pytestmark = pytest.mark.aws

runner = CliRunner()


def test_refresh_writes_the_providers_offers_as_a_catalog(moto: None, _isolated_home: Path) -> None:
    (_isolated_home / "config.yaml").write_text("providers:\n  aws:\n    regions: [us-east-1]\n")
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "aws", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    path = _isolated_home / "catalog" / "aws.csv"
    assert summary["path"] == str(path) and summary["regions"] == ["us-east-1"]
    offers = load_offers(path)
    assert len(offers) == summary["offers"] > 0
    g5 = next(o for o in offers if (o.zone, o.instance_type) == ("us-east-1a", "g5.xlarge"))
    got = (g5.provider, g5.gpu, g5.price_per_hour, g5.billing_granularity_s, g5.min_billing_s)
    assert got == ("aws", "A10G", 1.006, 1, 60)
    assert g5.interruption_bucket == ">20%"
    listed = runner.invoke(app, ["offers", "--catalog", str(path), "--gpu", "H100", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "p5.48xlarge" in listed.stdout


def test_refresh_of_an_unconfigured_provider_is_one_line(_isolated_home: Path) -> None:
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "aws"])
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: --provider: aws is not configured in {_isolated_home / 'config.yaml'}; "
                                "add providers.aws there")


def test_refresh_with_a_bad_config_is_one_line(_isolated_home: Path) -> None:
    (_isolated_home / "config.yaml").write_text("providers:\n  aws:\n    regions: [useast1]\n")
    r = runner.invoke(app, ["catalog", "refresh", "--provider", "aws"])
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: providers.aws.regions: 'useast1' is not an AWS region name (like us-east-1)"
