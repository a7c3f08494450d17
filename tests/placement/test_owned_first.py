"""Own capacity first, cloud burst after (gpuorch.placement.owned): the choice between a free
owned offer, a wait for a full one and a burst to the cheapest cloud, and the spec's
``max_wait`` (bad input: one line naming the field, exit 2, nothing stored)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.placement import candidates
from gpuorch.placement.owned import WAITS, choose, owned_providers


@pytest.fixture
def market(offer):
    """(a pool host's offer at an internal rate, a cheaper cloud offer, a dearer one)."""
    return (offer("A100-80GBx1", "A100-80GB", 0.5, provider="ssh", zone="host0", region="pool", minimum=0),
            offer("a2-ultragpu-1g", "A100-80GB", 0.4, provider="gcp"),
            offer("p4de.24xlarge-1", "A100-80GB", 4.0, provider="aws"))


def ranked(spec, *offers):
    return candidates(spec, list(offers))


def test_a_free_owned_offer_wins_over_a_cheaper_cloud_when_it_meets_the_deadline(market, job):
    host_o, cloud_o, dear_o = market
    spec = job(resources={"gpu": "A100:80GB:1"}, spot_policy="on-demand",
                    deadline={"at": "8h", "job_hours": 2}, max_wait="30m")
    (pool,) = ranked(spec, host_o)
    cloud, dear = ranked(spec, cloud_o, dear_o)
    c = choose([pool], [], [cloud, dear], max_wait_s=spec.max_wait, waited_s=0, time_left_s=8 * 3600, job_hours=2)
    assert c is not None and c.kind == "owned" and c.free == (pool,) and c.burst == cloud
    assert "owned capacity is free: ssh host0" in c.why and "to the deadline" in c.why


def test_an_owned_offer_too_slow_for_the_deadline_bursts(market, job):
    host_o, cloud_o, _ = market
    spec = job(resources={"gpu": "A100:80GB:1"}, spot_policy="on-demand", deadline={"at": "3h", "job_hours": 2})
    (pool,) = ranked(spec, host_o)
    (cloud,) = ranked(spec, cloud_o)
    c = choose([pool], [], [cloud], max_wait_s=None, waited_s=0, time_left_s=1.5 * 3600, job_hours=2)
    assert c is not None and c.kind == "burst" and c.burst == cloud and "after the deadline" in c.why
    # with nothing to burst to, late beats never
    alone = choose([pool], [], [], max_wait_s=None, waited_s=0, time_left_s=1.5 * 3600, job_hours=2)
    assert alone is not None and alone.kind == "owned"


def test_a_full_pool_is_waited_for_within_max_wait_and_the_deadline_then_bursts(market, job):
    host_o, cloud_o, _ = market
    spec = job(resources={"gpu": "A100:80GB:1"}, spot_policy="on-demand", deadline={"at": "8h", "job_hours": 2})
    (pool,) = ranked(spec, host_o)
    (cloud,) = ranked(spec, cloud_o)

    def at(waited: float, left: float = 8 * 3600.0, max_wait: float | None = 1800.0):
        return choose([], [pool], [cloud], max_wait_s=max_wait, waited_s=waited, time_left_s=left, job_hours=2)

    wait = at(600)
    assert wait is not None and wait.kind == "wait" and wait.why.startswith(WAITS)
    assert wait.wait_s == 1200 and "max_wait 30 min" in wait.why and "then bursts to gcp" in wait.why
    late = at(1800)
    assert late is not None and late.kind == "burst" and late.burst == cloud and "waited 30 min" in late.why
    finish_s = (pool.est_finish_hours - pool.est_hours + 2) * 3600  # start-up, then job_hours of work
    squeezed = at(0, left=finish_s + 60)  # waiting longer would leave too little time for the work
    assert squeezed is not None and squeezed.kind == "wait" and abs(squeezed.wait_s - 60) < 1e-6
    hopeless = at(0, left=finish_s - 60)
    assert hopeless is not None and hopeless.kind == "burst" and "miss the deadline" in hopeless.why
    no_wait = at(0, max_wait=None)
    assert no_wait is not None and no_wait.kind == "burst" and "sets no max_wait" in no_wait.why


def test_no_owned_option_leaves_the_ranking_alone(market, job):
    cloud_o = market[1]
    spec = job(resources={"gpu": "A100:80GB:1"})
    assert choose([], [], ranked(spec, cloud_o), max_wait_s=None, waited_s=0, time_left_s=None) is None


def test_owned_providers_reads_the_declared_capability():
    from gpuorch.registry import provider_class

    classes = {name: provider_class(name) for name in ("ssh", "kubernetes", "aws", "sim")}
    assert owned_providers(classes) == {"ssh", "kubernetes"}


def test_max_wait_without_a_deadline_is_one_line_exit_2_and_nothing_stored(tmp_path):
    runner = CliRunner()
    doc = {"name": "w", "run": "true", "resources": {"gpu": "A100:80GB:1"}, "max_wait": "30m"}
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["submit", str(p)])
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert "max_wait:" in line and "add deadline" in line
    p.write_text(yaml.safe_dump({**doc, "max_wait": "-5m", "deadline": {"at": "8h", "job_hours": 1}}))
    r = runner.invoke(app, ["submit", str(p)])
    assert r.exit_code == 2 and "max_wait" in r.output and len(r.output.strip().splitlines()) == 1
    assert json.loads(runner.invoke(app, ["status", "--json"]).output)["jobs"] == []


def test_plan_shows_the_owned_option_the_burst_option_and_why(tmp_path):
    from gpuorch.catalog import COLUMNS

    catalog = tmp_path / "offers.csv"
    catalog.write_text("\n".join([",".join(COLUMNS),
                                  "ssh,pool,host0,A100-80GBx1,A100-80GB,1,80,8,64,0.50,,,1",
                                  "gcp,us-east4,us-east4-a,a2-ultragpu-1g,A100-80GB,1,80,12,170,0.40,,,1"]) + "\n")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "j", "run": "x", "resources": {"gpu": "A100:80GB:1"},
                                   "spot_policy": "on-demand", "deadline": {"at": "8h", "job_hours": 2},
                                   "max_wait": "30m"}))
    runner = CliRunner()
    r = runner.invoke(app, ["plan", str(job), "--catalog", str(catalog)])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert any(line.startswith("owned option: ssh host0 A100-80GBx1 at $0.500/h") for line in lines), r.output
    assert any(line.startswith("burst option: gcp us-east4-a a2-ultragpu-1g at $0.400/h") for line in lines)
    assert any(line.startswith("while a slot is free: owned: owned capacity is free") for line in lines)
    assert any(line.startswith(f"when it is full: wait: {WAITS}") and "max_wait 30 min" in line for line in lines)
    data = json.loads(runner.invoke(app, ["plan", str(job), "--catalog", str(catalog), "--json"]).stdout)
    owned = data["owned_first"]
    assert owned["choice"] == "owned" and owned["when_full"] == "wait"
    assert owned["owned"]["provider"] == "ssh" and owned["burst"]["provider"] == "gcp"
    job.write_text(yaml.safe_dump({"name": "j", "run": "x", "resources": {"gpu": "A100:80GB:1"}}))
    plain = json.loads(runner.invoke(app, ["plan", str(job), "--catalog", str(catalog), "--json"]).stdout)
    assert plain["owned_first"]["when_full"] == "burst"  # no max_wait: a full pool bursts at once
    assert "sets no max_wait" in plain["owned_first"]["when_full_why"]
