"""``gpuorch plan`` and ``offers`` rank what the daemon would use, say so, and refuse unknown names.

The configured providers come from the daemon configuration (``--config``); ``local`` and ``sim``
answer with their simulated markets, the clouds with their rows of the shipped catalog.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.provider.catalog import load_offers

TRACES = Path(__file__).resolve().parents[1] / "data" / "spot-traces" / "aws-p3-2023"
runner = CliRunner()

JOB = "name: ft\nrun: python train.py\nmodel: {params: 8B, method: qlora, tokens: 20M}\n"


def cli(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def configs(tmp_path):
    local = tmp_path / "local.yaml"
    local.write_text("providers:\n  local: {}\n")
    sim = tmp_path / "sim.yaml"
    sim.write_text(f"providers:\n  sim: {{traces: '{TRACES}'}}\n")
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    return {"local": local, "sim": sim, "job": job, "dir": tmp_path}


def test_plan_ranks_the_configured_providers_by_default(configs):
    r = cli("--config", str(configs["local"]), "plan", str(configs["job"]), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["source"] == "the configured providers (local)"
    assert {c["provider"] for c in data["candidates"]} == {"local"}
    text = cli("--config", str(configs["local"]), "plan", str(configs["job"]))
    assert text.stdout.splitlines()[0].startswith("ranked the configured providers (local); work: estimated per "
                                                  "offer from model.tokens")


def test_plan_with_only_sim_enabled_finds_the_sim_market(configs):
    job = configs["dir"] / "v100.yaml"
    job.write_text("name: small\nrun: python train.py\nresources: {gpu: V100}\n")
    data = json.loads(cli("--config", str(configs["sim"]), "plan", str(job), "--json").stdout)
    assert data["source"] == "the configured providers (sim)"
    assert data["candidates"] and {c["provider"] for c in data["candidates"]} == {"sim"}
    assert not list(Path(os.environ["GPUORCH_HOME"]).rglob("market.json"))  # read-only: no replay started


def test_sim_offers_follow_a_running_replay(configs):
    """With a replay under way (its market.json), the sim's offers are priced at the replay's time,
    not at the traces' start; without one, at the start."""
    import time

    from gpuorch.registry import provider_class

    prices = TRACES.parents[1] / "spot-prices" / "aws-p3-2023"
    home = Path(os.environ["GPUORCH_HOME"])
    sim_cls = provider_class("sim")
    opts = {"traces": str(TRACES), "prices": str(prices)}
    at_start = {o.zone: o.spot_price_per_hour for o in sim_cls.catalog_offers(opts, home)}
    resolved = sim_cls.from_config_options(opts).model_dump(mode="json")
    (home / "sim").mkdir(parents=True, exist_ok=True)
    for hours_ago in (10, 40, 100):  # wall hours x 60 (time_scale): days into the replay
        (home / "sim" / "market.json").write_text(json.dumps({"options": resolved,
                                                              "origin": time.time() - hours_ago * 3600}))
        later = {o.zone: o.spot_price_per_hour for o in sim_cls.catalog_offers(opts, home)}
        if later != at_start:
            break
    assert later.keys() == at_start.keys() and later != at_start


def test_a_flag_selects_a_price_list_and_the_output_says_so(configs):
    data = json.loads(cli("--config", str(configs["local"]), "plan", str(configs["job"]), "--price-list",
                          "--json").stdout)
    shipped = {o.provider for o in load_offers()}  # every installed adapter's snapshot rows
    assert {"aws", "gcp"} <= shipped and "azure" not in shipped  # Azure ships no prices (docs/catalog.md)
    assert data["source"] == f"the shipped price list ({', '.join(sorted(shipped))})"
    assert {c["provider"] for c in data["candidates"]} <= shipped
    r = cli("--config", str(configs["local"]), "offers", "--price-list", "--top", "2")
    assert any(line.endswith(f"from {data['source']}") for line in r.stdout.splitlines())
    r = cli("--config", str(configs["local"]), "offers", "--json")
    assert json.loads(r.stdout)["source"] == "the configured providers (local)"


@pytest.mark.parametrize("args, message", [
    (["offers", "--provider", "foo"], "error: --provider: unknown provider 'foo' in the configured providers "
                                      "(local); known: local"),
    (["offers", "--price-list", "--region", "mars-1"], "error: --region: unknown region 'mars-1' in the shipped "
                                                       "price list"),
    (["offers", "--price-list", "--catalog", "x.csv"], "error: --catalog and --price-list exclude each other"),
])
def test_unknown_provider_or_region_is_an_error(configs, args, message):
    r = cli("--config", str(configs["local"]), *args)
    assert r.exit_code == 2 and r.stderr.startswith(message) and r.stderr.count("\n") == 1


def test_a_job_naming_an_unknown_provider_is_an_error(configs):
    job = configs["dir"] / "aws.yaml"
    job.write_text(JOB + "providers: [aws]\n")
    r = cli("--config", str(configs["local"]), "plan", str(job))
    assert r.exit_code == 2 and "providers: unknown provider 'aws' in the configured providers (local)" in r.stderr


@pytest.mark.parametrize("extra, said", [
    ("", "work: 1 h assumed (the default); give model.tokens, model.duration or deadline.job_hours"),
    ("deadline: {at: '@SOON@', job_hours: 6}\n", "work: deadline.job_hours = 6 h on every offer"),
])
def test_plan_states_the_work_hours_assumption(configs, extra, said):
    job = configs["dir"] / "w.yaml"
    soon = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")  # a month from now
    job.write_text("name: w\nrun: python train.py\nresources: {gpu: H100}\n" + extra.replace("@SOON@", soon))
    r = cli("--config", str(configs["local"]), "plan", str(job))
    assert r.exit_code == 0, r.output
    assert said in r.stdout.splitlines()[0]


def test_plan_shows_tensor_parallel_replicas(configs):
    job = configs["dir"] / "tp2.yaml"
    job.write_text("name: tp2\nrun: x\nmodel: {preset: llama-3.1-70b, method: inference, tokens: 10M}\n"
                   "distributed: {strategy: tp, degree: 2}\nspot_policy: on-demand\n")
    data = json.loads(cli("plan", str(job), "--price-list", "--json", "--top", "40").stdout)
    eight = [c for c in data["candidates"] if c["gpu_count"] == 8]
    assert eight and all(c["sharding"] == "tp" and c["gpus_used"] == 8 for c in eight)  # 4 replicas of 2
    text = cli("plan", str(job), "--price-list", "--top", "40").stdout
    assert "tp2 x4" in text
