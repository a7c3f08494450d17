"""The daemon's ``catalog_files:`` (gpuorch.provider.pricelists) through the assembled daemon and
the real CLI: price lists in our CSV and gpuhunt's, each row audited; a provider the rows name is
priced from them alone (the pass's offers, ``gpuorch offers`` and ``plan`` with that
configuration), a malformed row is left out with its file, line and column, rows of a provider that
is not enabled are not used, and ``catalog_strict`` refuses the configuration in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.catalog.gpuhunt import COLUMNS as HUNT
from gpuorch.cli.app import app
from gpuorch.errors import UserInputError
from gpuorch.testing.daemon import AssembledDaemon

runner = CliRunner()
OURS = """\
provider,region,zone,instance_type,gpu,gpu_count,gpu_memory_gib,vcpus,memory_gib,price_per_hour,spot_price_per_hour,interconnect,billing_granularity_s
local,local,local-a,a100x1,A100-80GB,1,80,8,64,0.99,,,1
local,local,local-a,a100x2,A100-80GB,2,80,16,128,abc,,,1
aws,us-east-1,use1-az1,g6.xlarge,L4,1,22.35,4,16,0.8,,,1
"""
# gpuhunt: an instance's on-demand and spot rows are one offer.
HUNT_ROWS = ["local.l4.1,local,0.31,4,16,1,L4,24,False,100,nvidia,,local",
             "local.l4.1,local,0.12,4,16,1,L4,24,True,100,nvidia,,local"]


def files(tmp_path: Path) -> list[str]:
    ours, hunt = tmp_path / "mine.csv", tmp_path / "hunt.csv"
    ours.write_text(OURS)
    hunt.write_text(",".join(HUNT) + "\n" + "\n".join(HUNT_ROWS) + "\n")
    return [str(ours), str(hunt)]


def test_the_files_price_the_providers_they_name_in_the_pass_and_in_offers(tmp_path: Path) -> None:
    config = {"providers": {"local": {}}, "catalog_files": files(tmp_path)}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        got = {(o.provider, o.instance_type, o.price_per_hour, o.spot_price_per_hour)
               for o in d.rec.offers.current(d.rec.clock.now())}
        assert got == {("local", "a100x1", 0.99, None), ("local", "local.l4.1", 0.31, 0.12)}
        cfg = tmp_path / "home" / "daemon-config.yaml"
        r = runner.invoke(app, ["--config", str(cfg), "offers", "--json"])
    assert r.exit_code == 0, r.output
    offers = json.loads(r.stdout)["offers"]
    assert sorted((o["instance_type"], o["price_per_hour"]) for o in offers) == [("a100x1", 0.99), ("local.l4.1", 0.31)]
    assert "mine.csv line 3, column price_per_hour: 'abc' is not a number (row skipped)" in r.stderr
    assert "not enabled are not used (1 aws)" in r.stderr


def test_catalog_strict_refuses_the_configuration_naming_the_line_and_field(tmp_path: Path) -> None:
    config = {"providers": {"local": {}}, "catalog_files": files(tmp_path), "catalog_strict": True}
    with pytest.raises(UserInputError) as e:
        AssembledDaemon.start(tmp_path / "home", config)
    assert "mine.csv line 3, column price_per_hour" in str(e.value) and "catalog_strict: false" in str(e.value)
    r = runner.invoke(app, ["--config", str(tmp_path / "home" / "daemon-config.yaml"), "offers"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "line 3, column price_per_hour" in r.output


def test_files_pricing_no_enabled_provider_are_refused_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "aws-only.csv"
    other.write_text(OURS.splitlines()[0] + "\n" + OURS.splitlines()[3] + "\n")
    with pytest.raises(UserInputError, match="no row of .*aws-only.csv prices an enabled provider"):
        AssembledDaemon.start(tmp_path / "home", {"providers": {"local": {}}, "catalog_files": [str(other)]})
