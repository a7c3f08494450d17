"""Lifetime limits through the assembled daemon (issue 35 items 3 and 4).

- ``max_duration`` ends a running job with a final checkpoint: the sim provider with the agent
  played by the test (``agents: external``, as tests/harness/test_final_checkpoint.py), so the
  stop request and the hand-off are driven step by step.
- ``idle_stop`` on a dev box of the local provider, its real keepalive command reporting every
  second and a fake GPU utilisation feed (a file), with the daemon's clock moved forward
  (``gpuorch.clock.utcnow``, what the daemon's SystemClock reads): a busy GPU and an open
  ``gpuorch ssh`` session keep the box up; idle past the limit it is held, and ``gpuorch dev``
  starts it again as the same job (whose volume, deleted only when a job ends, it keeps).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from tests.harness.test_final_checkpoint import finals, play_agent, sim_config

pytestmark = pytest.mark.timeout(300)
runner = CliRunner()


def test_max_duration_ends_a_running_job_after_a_final_checkpoint(tmp_path):
    with AssembledDaemon.start(tmp_path / "home", sim_config(tmp_path)) as d:
        sim = d.adapter("sim")
        job = d.submit({"name": "capped", "run": "python train.py", "resources": {"gpu": "V100"},
                        "spot_policy": "spot", "providers": ["sim"], "max_duration": "2s",
                        "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "10m"}})
        a1 = d.until(lambda: next((a for a in d.attempts(job) if a.instance_id), None), what="a launch")
        run = sim.instances_dir / a1.instance_id / "run"
        d.until(lambda: (run / "agent.json").exists(), what="the agent's start")
        play_agent(run, state="running", uploaded=["step-1"], last_checkpoint="step-1")
        d.until(lambda: (run / "stop.json").exists(), what="the stop request once 2 s have run")
        assert d.attempts(job)[0].status == AttemptStatus.DRAINING  # the job's final checkpoint is under way
        play_agent(run, state="checkpointing", uploaded=["step-1", "step-2"], last_checkpoint="step-2",
                   final_checkpoint="step-2", final_done=True)
        d.until(lambda: d.attempts(job)[0].status == AttemptStatus.ENDED, what="the attempt's end")
        row = d.job(job)
        assert row.status == JobStatus.CANCELLED
        assert row.message.startswith("max_duration 2s reached: stopped by the daemon after a final checkpoint")
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.CANCELLED
        assert finals(d, job) == [(1, "step-2")]


def test_max_duration_terminates_a_job_without_checkpoints_at_once(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:  # the local provider: real processes
        job = d.submit({"name": "endless", "run": "sleep 600", "max_duration": "1s"})
        row = d.until_terminal(job)
        assert row.status == JobStatus.CANCELLED
        assert row.message == "max_duration 1s reached: stopped by the daemon"
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.CANCELLED and a.started_at is not None


class Shift:
    """The daemon's clock, ``seconds`` ahead of the wall clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import gpuorch.clock

        self.seconds, real = 0.0, gpuorch.clock.utcnow
        monkeypatch.setattr(gpuorch.clock, "utcnow", lambda: real() + timedelta(seconds=self.seconds))

    def now(self) -> datetime:
        import gpuorch.clock

        return gpuorch.clock.utcnow()


def metrics(d: AssembledDaemon, job: int) -> dict:
    row = d.job(job)
    return json.loads(row.metrics) if row.metrics else {}


def fresh(d: AssembledDaemon, job: int, since: datetime, **want: object) -> bool:
    """A metrics line read at or after ``since`` (daemon time) that says ``want``."""
    row = d.job(job)
    m = json.loads(row.metrics) if row.metrics else {}
    at = row.metrics_at.replace(tzinfo=since.tzinfo) if row.metrics_at and not row.metrics_at.tzinfo else \
        row.metrics_at
    return at is not None and at >= since and all(m.get(k) == v for k, v in want.items())


def test_idle_stop_holds_an_idle_box_keeps_a_busy_or_used_one_and_dev_starts_it_again(tmp_path, monkeypatch):
    util = tmp_path / "gpu-util"
    util.write_text("0\n")
    clock = Shift(monkeypatch)
    with AssembledDaemon.start(tmp_path / "home") as d:
        monkeypatch.setenv("GPUORCH_HOME", str(d.config.home))
        cfg = ["--config", str(d.config.home / "daemon-config.yaml")]
        from gpuorch.devbox.boxes import BoxRequest

        spec = BoxRequest("nb", idle_stop="30m", env={"DEVBOX_GPU_UTIL_FILE": str(util),
                                                     "DEVBOX_TICK_S": "1"}).spec()
        job = d.submit(spec)
        d.until(lambda: d.status(job) == JobStatus.RUNNING and "idle_s" in metrics(d, job), what="the box's report")
        assert d.job(job).status == JobStatus.RUNNING

        clock.seconds += 29 * 60  # idle, but not for 30 minutes yet
        d.run_pass()
        assert d.status(job) == JobStatus.RUNNING

        util.write_text("57\n")  # busy: a report after the next move says so, and the box stays
        since = clock.now()
        d.until(lambda: fresh(d, job, since, gpu_util=57, idle_s=0), what="a busy report")
        clock.seconds += 29 * 60
        d.run_pass()
        assert d.status(job) == JobStatus.RUNNING

        util.write_text("0\n")
        gate = tmp_path / "gate"  # gpuorch ssh's command: the session lasts until the gate opens
        ssh = subprocess.Popen([sys.executable, "-m", "gpuorch", *cfg, "ssh", "nb", "--", "sh", "-c",
                                f"while [ ! -e {gate} ]; do sleep 0.1; done; exit 3"])
        try:
            since = clock.now()
            d.until(lambda: fresh(d, job, since, ssh_sessions=1, idle_s=0), what="a report of the open session")
            clock.seconds += 29 * 60
            d.run_pass()
            assert d.status(job) == JobStatus.RUNNING
            gate.touch()
            assert ssh.wait(60) == 3  # the command's exit code (local provider: a shell in the run dir)
        finally:
            gate.touch()
            ssh.wait(60)

        since = clock.now()
        d.until(lambda: fresh(d, job, since, ssh_sessions=0), what="the session's end")
        clock.seconds += 31 * 60
        d.until(lambda: d.status(job) == JobStatus.HELD, what="the idle stop")
        row = d.job(job)
        assert row.message.startswith("idle stop: no SSH session and GPU below 5 % for 30m; volume kept")
        assert row.finished_at is None  # unfinished: apply/volumes.py deletes only a finished job's volume
        (a1,) = d.attempts(job)
        assert a1.reason == TerminationReason.HELD
        for _ in range(3):  # held: no new box until the user asks
            d.run_pass()
        assert len(d.attempts(job)) == 1 and d.status(job) == JobStatus.HELD

        r = runner.invoke(app, [*cfg, "dev", "nb", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["started"] == "again" and json.loads(r.output)["id"] == job
        d.until(lambda: d.status(job) == JobStatus.RUNNING and len(d.attempts(job)) == 2, what="the box again")
        assert [r["kind"] for r in d.service.jobs()] == ["dev"]
        d.service.cancel(str(job))
        d.until_terminal(job)
