"""Issue 16, item 9 (at-most-once completion): a relaunched attempt whose predecessor already ran
the job to its end reports that result instead of running the job again."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from gpuorch.agent.protocol import AgentConfig, NoticeSource, read_status
from gpuorch.checkpoint import open_store
from gpuorch.checkpoint.handoff import read_completed

REPO = Path(__file__).resolve().parents[2]


def attempt(tmp_path: Path, number: int, store_url: str, counter: Path):
    rundir = tmp_path / f"run-{number}"
    rundir.mkdir()
    code = (f"open({str(counter)!r}, 'a').write('ran\\n'); import json, os; "
            f"json.dump({{'attempt': {number}}}, open(os.environ['GPUORCH_RESULT_FILE'], 'w'))")
    config = AgentConfig(notice=NoticeSource(), job_id=1, attempt=number, job_name="once",
                         run=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", checkpoint_url=store_url)
    (rundir / "agent.json").write_text(config.to_json())
    proc = subprocess.run([sys.executable, "-m", "gpuorch.agent", str(rundir)], cwd=str(REPO), timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    status = read_status(rundir)
    assert status is not None, proc.stderr.decode()[-2000:]
    return status


def test_a_relaunch_after_a_completion_does_not_run_the_job_again(tmp_path):
    store_url, counter = (tmp_path / "store").as_uri(), tmp_path / "runs.log"
    first = attempt(tmp_path, 1, store_url, counter)
    assert (first.state, first.exit_code, first.result) == ("exited", 0, {"attempt": 1})
    store, prefix = open_store(store_url)
    assert read_completed(store, prefix).attempt == 1  # durable before the agent reported
    second = attempt(tmp_path, 2, store_url, counter)  # its instance vanished before the daemon heard
    assert (second.state, second.exit_code, second.result) == ("exited", 0, {"attempt": 1})
    assert counter.read_text().splitlines() == ["ran"]  # the job ran once


def test_a_failed_job_leaves_no_completion(tmp_path):
    store_url = (tmp_path / "store").as_uri()
    rundir = tmp_path / "run"
    rundir.mkdir()
    config = AgentConfig(notice=NoticeSource(), job_id=1, attempt=1, job_name="once", run="exit 3",
                         checkpoint_url=store_url)
    (rundir / "agent.json").write_text(config.to_json())
    subprocess.run([sys.executable, "-m", "gpuorch.agent", str(rundir)], cwd=str(REPO), timeout=120,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    store, prefix = open_store(store_url)
    assert read_status(rundir).exit_code == 3 and read_completed(store, prefix) is None
