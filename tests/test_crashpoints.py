"""Named crash points: parsed from the environment, seeded, and a real SIGKILL when they hit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gpuorch.ops import crashpoints
from gpuorch.ops.crashpoints import CrashPlan


def test_parse_default_patterns_and_exact_names():
    plan = CrashPlan.parse("seed=3, p=0.1, launch.*=0.5, launch.called=1")
    assert plan.seed == 3
    assert plan.probability("launch.called") == 1.0
    assert plan.probability("launch.intent") == 0.5
    assert plan.probability("pass.done") == 0.1
    with pytest.raises(ValueError, match="cannot read 'oops'"):
        CrashPlan.parse("oops")


def test_same_seed_same_draws():
    a, b = CrashPlan.parse("seed=9,p=0.5"), CrashPlan.parse("seed=9,p=0.5")
    assert [a.rng.random() for _ in range(5)] == [b.rng.random() for _ in range(5)]


def test_off_without_the_variable(monkeypatch):
    monkeypatch.delenv(crashpoints.ENV, raising=False)
    crashpoints.reset()
    crashpoints.crashpoint("launch.called")  # nothing happens
    assert crashpoints.active() is None
    crashpoints.reset()


def test_a_hit_logs_the_point_and_sigkills_the_process(tmp_path):
    log = tmp_path / "crashes.log"
    code = ("from gpuorch.ops.crashpoints import crashpoint\n"
            "crashpoint('pass.done')\nprint('survived pass.done', flush=True)\n"
            "crashpoint('launch.called')\nprint('survived launch.called', flush=True)\n")
    env = {**os.environ, crashpoints.ENV: "seed=1,launch.called=1", crashpoints.LOG_ENV: str(log)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout == "survived pass.done\n"
    assert log.read_text().split()[-1] == "launch.called"
