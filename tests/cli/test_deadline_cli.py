"""``submit`` and ``status`` for jobs with a deadline, through typer's runner, on a real SQLite store."""

from __future__ import annotations

import json
from datetime import timedelta

import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.clock import utcnow
from gpuorch.jobs import events
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, list(args))


def job_file(tmp_path, deadline, name="train", **extra):
    doc = {"name": name, "run": "python3 train.py", "resources": {"gpu": "A100:80GB:1"},
           "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"}, "deadline": deadline, **extra}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_a_deadline_on_demand_cannot_meet_is_refused_with_one_line_and_nothing_stored(tmp_path):
    r = cli("submit", str(job_file(tmp_path, {"at": "3h", "job_hours": 4})))
    assert r.exit_code == 2
    [line] = r.output.strip().splitlines()
    assert "deadline: cannot be met even on on-demand" in line and "job_hours 4 h" in line
    assert "give a later deadline or fewer deadline.job_hours" in line
    assert json.loads(cli("status", "--json").output)["jobs"] == []


def test_a_deadline_only_on_demand_can_meet_is_accepted_with_a_warning(tmp_path):
    r = cli("submit", str(job_file(tmp_path, {"at": "260m", "job_hours": 4})), "--json")
    assert r.exit_code == 0, r.output
    assert "only on-demand can meet it" in json.loads(r.output)["warning"]
    plain = cli("submit", str(job_file(tmp_path, {"at": "260m", "job_hours": 4}, name="again")))
    assert plain.exit_code == 0 and "warning: deadline: only on-demand" in plain.output
    forced = cli("submit", str(job_file(tmp_path, {"at": "260m", "job_hours": 4}, name="od", spot_policy="on-demand")),
                 "--json")
    assert forced.exit_code == 0 and json.loads(forced.output)["warning"] is None


def test_a_model_job_is_checked_on_the_fastest_fitting_offer(tmp_path):
    model = {"params": "8B", "method": "qlora", "tokens": "2B"}
    far = cli("submit", str(job_file(tmp_path, "30d", name="far", model=model, resources={})), "--json")
    assert far.exit_code == 0 and json.loads(far.output)["warning"] is None, far.output
    r = cli("submit", str(job_file(tmp_path, "10m", name="soon", model=model, resources={})))
    assert r.exit_code == 2 and "on the fastest fitting offer" in r.output


def test_a_deadline_without_known_work_names_the_field(tmp_path):
    r = cli("submit", str(job_file(tmp_path, "8h")))
    assert r.exit_code == 2 and "deadline.job_hours: required" in r.output
    r = cli("submit", str(job_file(tmp_path, {"at": "someday", "job_hours": 1})))
    assert r.exit_code == 2 and "deadline.at: cannot read 'someday'" in r.output


def test_status_shows_the_deadline_the_slack_and_the_policys_last_decision(tmp_path):
    r = cli("submit", str(job_file(tmp_path, {"at": "8h", "job_hours": 2, "startup": "5m"})), "--json")
    job_id = json.loads(r.output)["id"]
    [row] = json.loads(cli("status", "--json").output)["jobs"]
    d = row["deadline"]
    assert 7.9 < d["left_h"] <= 8.0 and d["work_h"] == 2 and d["done_h"] == 0
    assert 5.8 < d["slack_h"] < 5.92  # 8 h - 2 h - 5 min start-up - the daemon's margin
    table = runner.invoke(app, ["status"], env={"COLUMNS": "200"}).output
    assert "DEADLINE" in table and "in 8.0h, slack 5.9h" in table
    # the daemon's decision, as it records it
    store = Store(load_config().url)
    with store.write() as s:
        events.record(s, utcnow() + timedelta(seconds=1), "deadline", "deadline policy waits for spot capacity: slack "
                      "5.9 h is above the reserve 5.9 h", job_id=job_id, decision="wait", slack_h=5.9)
    store.close()
    detail = json.loads(cli("status", str(job_id), "--json").output)
    assert detail["deadline"]["decision"]["decision"] == "wait"
    out = runner.invoke(app, ["status", str(job_id)], env={"COLUMNS": "200"}).output
    assert "deadline 20" in out and "0.0 of 2.0 h of work saved" in out
    assert "last decision" in out and "waits for spot capacity" in out


def test_a_sweep_whose_deadline_on_demand_cannot_meet_is_refused(tmp_path):
    sweep = {"name": "lr", "job": {"run": "python3 train.py", "resources": {"gpu": "A100:80GB:1"},
                                   "deadline": {"at": "30d", "job_hours": 3}},
             "parameters": {"LR": [0.1, 0.2]}, "deadline": "2h"}
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(sweep))
    r = cli("sweep", "submit", str(p))
    assert r.exit_code == 2 and "deadline: cannot be met even on on-demand" in r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []
    sweep["deadline"] = "20h"
    p.write_text(yaml.safe_dump(sweep))
    assert cli("sweep", "submit", str(p)).exit_code == 0
