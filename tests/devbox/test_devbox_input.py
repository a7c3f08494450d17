"""Bad input to dev boxes and lifetime limits (issue 35): ``idle_stop`` or ``max_duration`` that
is negative, zero or not a duration, ``idle_stop`` on a job that is not a dev box, ``gpuorch ssh``
to a job that has finished or is not running: one line naming the field and the fix, exit code 2,
nothing stored. Through typer's runner on a real SQLite store (the test's GPUORCH_HOME)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.jobs.lifetime import duration_text
from gpuorch.jobs.spec import parse_spec

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def no_jobs() -> bool:
    return json.loads(cli("status", "--json").output)["jobs"] == []


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--idle-stop", "-5m", "--idle-stop (idle_stop)"),
    ("--idle-stop", "soon", "write it like 30s, 10m, 2h or 1h30m"),
    ("--idle-stop", "0", "must be greater than 0"),
    ("--max-duration", "-2h", "--max-duration (max_duration)"),
    ("--max-duration", "two hours", "write it like 30s, 10m, 2h or 1h30m"),
])
def test_a_bad_duration_of_gpuorch_dev_is_one_line_and_nothing_is_stored(option, value, words):
    r = cli("dev", "box", option, value)
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert line.startswith("error: gpuorch dev: ") and words in line, line
    assert no_jobs()


def test_gpu_and_model_together_are_refused():
    r = cli("dev", "box", "--gpu", "L4:1", "--model", "8B")
    assert r.exit_code == 2 and "give --gpu or --model, not both" in r.output
    assert no_jobs()


@pytest.mark.parametrize(("extra", "words"), [
    ({"max_duration": "-1h"}, "max_duration: duration '-1h' is negative; write 0s or more"),
    ({"max_duration": -3600}, "max_duration: duration must not be negative"),
    ({"max_duration": "forever"}, "max_duration: cannot read duration 'forever'"),
    ({"idle_stop": "30m"}, "idle_stop: only a dev box (kind: dev, gpuorch dev) stops when idle"),
    ({"kind": "notebook"}, "kind: "),
])
def test_a_bad_lifetime_in_a_job_file_is_one_line_and_nothing_is_stored(tmp_path, extra, words):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "train", "run": "python3 train.py", **extra}))
    r = cli("submit", str(path), "--yes")
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert words in line, line
    assert no_jobs()


def test_the_lifetime_fields_round_trip_and_default_to_a_plain_job():
    plain = parse_spec({"name": "a", "run": "true"})
    assert (plain.kind, plain.max_duration, plain.idle_stop) == ("job", None, None)
    box = parse_spec({"name": "b", "run": "true", "kind": "dev", "idle_stop": "30m", "max_duration": "2h"})
    assert (box.kind, box.idle_stop, box.max_duration) == ("dev", 1800.0, 7200.0)
    assert duration_text(7200) == "2h" and duration_text(5430) == "1h30m30s" and duration_text(45) == "45s"


def test_ssh_to_a_job_that_finished_or_is_not_running_is_one_line_exit_2():
    from gpuorch.clock import utcnow
    from gpuorch.jobs import intent
    from gpuorch.ops.config_sources import load_config
    from gpuorch.store import Store
    from gpuorch.store.models import Job, JobStatus

    store = Store(load_config(None).url)
    try:
        done = intent.submit(store, parse_spec({"name": "done", "run": "true"}), utcnow())
        intent.submit(store, parse_spec({"name": "waiting", "run": "true"}), utcnow())
        with store.write() as s:
            s.get(Job, done.id).status = JobStatus.SUCCEEDED
    finally:
        store.close()
    r = cli("ssh", "done", "--", "true")
    assert r.exit_code == 2
    [line] = r.output.strip().splitlines()
    assert "gpuorch ssh: done is succeeded (finished): it has no instance to connect to" in line
    r = cli("port", "waiting", "8888")
    assert r.exit_code == 2 and "gpuorch port: waiting is queued, not running yet" in r.output
    assert cli("ssh", "nosuch", "--", "true").exit_code == 3  # not found, as for every job command
    r = cli("port", "done", "70000")
    assert r.exit_code == 2 and "'remote_port'" in r.output and "65535" in r.output


def test_a_sweep_template_s_max_duration_bounds_every_trial(tmp_path):
    from gpuorch.clock import utcnow
    from gpuorch.sweeps.spec import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "job": {"name": "t", "run": "python3 train.py {LR}",
                                                          "max_duration": "2h"},
                                    "parameters": {"LR": [0.1, 0.01]}}))
    _, trials = load_sweep(path, utcnow())
    assert [t.max_duration for _, t in trials] == [7200.0, 7200.0]


def test_dev_queues_a_box_once_warns_on_spot_and_refuses_a_name_a_job_holds(tmp_path):
    from gpuorch.devbox.boxes import SPOT_WARNING

    r = cli("dev", "sp", "--spot", "--idle-stop", "30m", "--json")
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout)
    assert answer["started"] == "new" and answer["warnings"] == [SPOT_WARNING]
    again = json.loads(cli("dev", "sp", "--json").stdout)
    assert (again["started"], again["id"]) == ("running", answer["id"])  # queued already: nothing new
    [job] = json.loads(cli("status", "--json").output)["jobs"]
    assert (job["kind"], job["status"]) == ("dev", "queued")
    stored = cli("status", "sp", "--json")
    assert json.loads(stored.output)["kind"] == "dev"

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "train", "run": "python3 train.py"}))
    assert cli("submit", str(path), "--yes").exit_code == 0
    r = cli("dev", "train")
    assert r.exit_code == 2
    [line] = r.output.strip().splitlines()
    assert "gpuorch dev: 'train' is a queued job, not a dev box; choose another name" in line
    assert len(json.loads(cli("status", "--json").output)["jobs"]) == 2
