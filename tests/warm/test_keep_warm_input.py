"""Bad ``keep_warm`` (issue 35, bad input): negative, not a duration or over a day, in a job or a
sweep's job: one line naming the field and the fix, exit code 2, nothing stored."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def job(**extra: object) -> dict:
    return {"name": "train", "run": "true", "resources": {"gpu": "A100:80GB:1"}, **extra}


@pytest.mark.parametrize(("value", "says"), [("-5m", "keep_warm"), ("abc", "cannot read duration 'abc'"),
                                             (-1, "must not be negative"), ("25h", "keep_warm")])
def test_a_bad_keep_warm_is_refused_with_one_line_and_nothing_stored(tmp_path, value, says):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job(keep_warm=value)))
    r = cli("submit", str(path))
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert line.startswith("error: ") and "keep_warm" in line and says in line, line
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "lr", "job": job(keep_warm=value), "parameters": {"LR": [0.1, 0.2]}}))
    r = cli("sweep", "submit", str(sweep))
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "keep_warm" in r.output, r.output
    sweep.write_text(yaml.safe_dump({"name": "lr", "job": job(), "keep_warm": value, "parameters": {"LR": [0.1]}}))
    r = cli("sweep", "submit", str(sweep))
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "keep_warm" in r.output, r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []


def test_keep_warm_defaults_to_none_for_a_job_and_three_minutes_for_a_sweep_trial(tmp_path):
    from gpuorch.jobs.spec import parse_spec
    from gpuorch.sweeps.spec import parse_sweep

    assert parse_spec(job(), "job").keep_warm == 0
    assert parse_spec(job(keep_warm="10m"), "job").keep_warm == 600
    from gpuorch.clock import utcnow

    _, trials = parse_sweep({"name": "lr", "job": job(), "parameters": {"LR": [0.1]}}, "sweep", utcnow())
    assert trials[0][1].keep_warm == 180
    _, trials = parse_sweep({"name": "lr", "job": job(keep_warm=0), "parameters": {"LR": [0.1]}}, "sweep", utcnow())
    assert trials[0][1].keep_warm == 0
    _, trials = parse_sweep({"name": "lr", "job": job(), "keep_warm": "10m", "parameters": {"LR": [0.1]}}, "sweep",
                            utcnow())
    assert trials[0][1].keep_warm == 600
