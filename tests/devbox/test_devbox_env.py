"""``gpuorch dev --env KEY=VALUE`` (repeatable): stored in the box's spec ``env``; each checked as
a job spec's env is (``jobs.validate``). Bad input is one line naming ``--env``, exit code 2,
nothing stored. Through typer's runner on a real SQLite store (the test's GPUORCH_HOME).
(The stored env and the box's kind over the API: tests/api/test_job_kind.py.)"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def no_jobs() -> bool:
    return json.loads(cli("status", "--json").output)["jobs"] == []


@pytest.mark.parametrize(("args", "words"), [
    (["--env", "HF_HOME"], "--env 'HF_HOME': expected KEY=VALUE, like --env HF_HOME=/data/hf"),
    (["--env", "1X=a"], "--env '1X=a': invalid variable name '1X'; use letters, digits and _"),
    (["--env", "=a"], "--env '=a': invalid variable name ''"),
    (["--env", "GPUORCH_TOKEN=x"], "GPUORCH_TOKEN: GPUORCH_* variables are set by gpuorch; rename yours"),
    (["--env", "A=\0"], "the value contains a NUL byte; remove it"),
    (["--env", "A=1", "--env", "A=2"], "--env A: given twice; keep one"),
])
def test_a_bad_env_of_gpuorch_dev_is_one_line_and_nothing_is_stored(args, words):
    r = cli("dev", "box", "--gpu", "L4:1", *args)
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert line.startswith("error: gpuorch dev: ") and words in line, line
    assert no_jobs()


def test_env_on_a_box_that_exists_warns_that_it_keeps_its_own():
    first = cli("dev", "box", "--gpu", "L4:1", "--env", "A=1", "--json")
    assert first.exit_code == 0 and json.loads(first.output)["started"] == "new"
    again = cli("dev", "box", "--gpu", "L4:1", "--env", "A=2")
    assert again.exit_code == 0, again.output
    assert "warning: --env: box 1 keeps the environment it was created with; for a new one, gpuorch cancel box " \
        "first" in again.output
    assert "is already queued" in again.output
    plain = cli("dev", "box", "--gpu", "L4:1")
    assert plain.exit_code == 0 and "warning" not in plain.output
