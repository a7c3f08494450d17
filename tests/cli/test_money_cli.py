"""``gpuorch cost`` and ``gpuorch sweep`` through typer's runner, against a real SQLite store."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason

runner = CliRunner()

SWEEP = {
    "name": "lr",
    "job": {"run": "python3 train.py --lr {LR}", "resources": {"gpu": "A100:80GB:1"}},
    "parameters": {"LR": [0.001, 0.01], "SEED": [1, 2, 3]},
    "max_parallel": 2,
    "budget": {"max_cost": 5},
    "deadline": "8h",
    "objective": {"metric": "loss", "mode": "min"},
}


def cli(*args):
    return runner.invoke(app, list(args))


def write(tmp_path, doc, name="sweep.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def test_sweep_submit_status_cancel(tmp_path):
    r = cli("sweep", "submit", str(write(tmp_path, SWEEP)), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["trials"] == 6
    status = json.loads(cli("sweep", "status", "lr", "--json").output)
    assert status["max_cost"] == 5 and status["spent"] == 0 and status["objective"] == {
        "metric": "loss", "mode": "min", "source": "metrics"}
    assert [(t["name"], t["params"]) for t in status["trials"][:2]] == [
        ("lr-0", {"LR": 0.001, "SEED": 1}), ("lr-1", {"LR": 0.01, "SEED": 2})]  # interleaved: sweeps.grid
    jobs = json.loads(cli("status", "--json").output)["jobs"]
    assert len(jobs) == 6 and {j["status"] for j in jobs} == {"queued"}
    again = cli("sweep", "submit", str(write(tmp_path, SWEEP)))
    assert again.exit_code == 2 and "still active" in again.output
    assert "spent $0.0000 of $5.00" in cli("sweep", "status", "lr").output
    [listed] = json.loads(cli("sweep", "status", "--json").output)  # without a name: every sweep, no trials
    assert listed == {k: v for k, v in status.items() if k != "trials"} and listed["counts"] == {"queued": 6}
    assert "lr" in cli("sweep", "status").output
    r = cli("sweep", "cancel", "lr", "--json")
    assert json.loads(r.output) == {"id": 1, "name": "lr", "status": "cancelled", "trials_cancelled": 6}


@pytest.mark.parametrize("change, field", [
    ({"parameters": {}}, "parameters"),
    ({"parameters": {"LR": []}}, "parameters"),
    ({"objective": {"metric": "loss", "mode": "maximize"}}, "objective.mode"),
    ({"budget": {"max_cost": -1}}, "budget.max_cost"),
    ({"deadline": "2020-01-01T08:00"}, "deadline"),
    ({"max_parallel": 0}, "max_parallel"),
    ({"search": {"method": "random"}}, "search.count"),
    ({"parameters": {"LR": {"loguniform": [0.0001, 0.1]}}}, "parameters.LR"),
    ({"job": {"run": "x", "resources": {"gpu": "Z900"}}}, "resources.gpu"),
])
def test_bad_sweep_exits_2_with_one_line_and_writes_nothing(tmp_path, change, field):
    r = cli("sweep", "submit", str(write(tmp_path, {**SWEEP, **change})))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []
    assert cli("sweep", "status", "lr").exit_code == 3  # no sweep either (3: not found)


def test_random_search_is_seeded(tmp_path):
    doc = {**SWEEP, "parameters": {"LR": {"loguniform": [0.0001, 0.1]}, "SEED": {"int": [0, 9]}},
           "search": {"method": "random", "count": 5, "seed": 3}}
    cli("sweep", "submit", str(write(tmp_path, doc)))
    first = [t["params"] for t in json.loads(cli("sweep", "status", "lr", "--json").output)["trials"]]
    cli("sweep", "cancel", "lr")
    cli("sweep", "submit", str(write(tmp_path, doc)))
    second = [t["params"] for t in json.loads(cli("sweep", "status", "lr", "--json").output)["trials"]]
    assert first == second and len(first) == 5 and len({p["LR"] for p in first}) == 5
    assert all(0.0001 <= p["LR"] <= 0.1 and p["SEED"] in range(10) for p in first)


@pytest.fixture
def billed():
    """Two finished attempts: 23:00-01:00 at $3.60/h (local), and one hour at $1.20/h (fake)."""
    store = Store(load_config().url)
    t = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)
    with store.write() as s:
        for name, provider, price, hours in (("a", "local", 3.6, 2), ("b", "fake", 1.2, 1)):
            job = Job(name=name, spec="{}", status=JobStatus.SUCCEEDED, created_at=t)
            s.add(job)
            s.flush()
            s.add(Attempt(job_id=job.id, number=1, status=AttemptStatus.ENDED, reason=TerminationReason.SUCCEEDED,
                          provider=provider, region="r", zone="z", instance_type="i", price_per_hour=price,
                          billing_granularity_s=1, min_billing_s=60, launched_at=t,
                          ended_at=t.replace(hour=0, day=2) if hours == 1 else t.replace(hour=1, day=2)))
    store.close()


def test_cost_by_job_provider_and_day(billed):
    by_job = json.loads(cli("cost", "--json").output)
    assert by_job["total"] == pytest.approx(8.4)
    assert [(r["job"], r["cost"]) for r in by_job["rows"]] == [("a", 7.2), ("b", 1.2)]
    by_provider = json.loads(cli("cost", "--by", "provider", "--json").output)
    assert {r["key"]: r["cost"] for r in by_provider["rows"]} == {"fake": 1.2, "local": 7.2}
    by_day = json.loads(cli("cost", "--by", "day", "--json").output)
    assert {r["key"]: r["cost"] for r in by_day["rows"]} == {"2026-03-01": pytest.approx(4.8), "2026-03-02": 3.6}
    since = json.loads(cli("cost", "--since", "2026-03-02", "--by", "sweep", "--json").output)
    assert since["total"] == pytest.approx(3.6) and since["rows"][0]["key"] == "(no sweep)"
    assert json.loads(cli("cost", "--since", "7d", "--json").output)["total"] == 0
    assert "total $8.4000 (all time)" in cli("cost").output


@pytest.mark.parametrize("args, field", [(["--since", "yesterday"], "--since"), (["--by", "zone"], "--by")])
def test_cost_bad_options_exit_2(args, field):
    r = cli("cost", *args)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and field in r.output
