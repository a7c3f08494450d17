"""``SshRunner.recycle`` against a real sshd (a warm instance, spec ``keep_warm``;
gpuorch/runners/recycle.py): an agent that outlived its ``exited`` status is stopped, an
unrelated process that got its pid never is; an unfinished agent is refused; the run directory is
set aside and the next ``start`` places a fresh agent; the idle watcher powers off only when the
heartbeat stops, and stands down when the next agent starts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.testing import wait_until

SLEEPER = "import time; time.sleep(120)"


def finished_run(run: Path, state: str = "exited", **config: object) -> None:
    """A run directory as a finished agent leaves it."""
    (run / "work").mkdir(parents=True)
    cfg = AgentConfig(job_id=7, attempt=2, job_name="j", run="true", **config)  # type: ignore[arg-type]
    (run / "agent.json").write_text(cfg.to_json())
    (run / "status.json").write_text(AgentStatus(state=state, exit_code=0).to_json())


def alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_recycle_stops_a_lingering_agent_sets_the_run_aside_and_a_new_agent_starts(make_runner, tmp_path):
    runner = make_runner()
    run = tmp_path / "remote" / "run"
    finished_run(run)
    # Still running as the agent of this run directory (its argv names it); and a stranger.
    agent = subprocess.Popen([sys.executable, "-c", SLEEPER, str(run)], start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        (run / "agent.pid").write_text(f"{agent.pid}\n")
        runner.recycle()
        wait_until(lambda: not alive(agent), timeout_s=10, what="the lingering agent stopped")
        assert not run.exists()
        [aside] = (tmp_path / "remote" / "runs").iterdir()
        assert aside.name.startswith("2-7-") and (aside / "agent.json").exists()
        runner.recycle()  # idempotent: nothing more to set aside
        assert [p.name for p in (tmp_path / "remote" / "runs").iterdir()] == [aside.name]
        # A pid reused by another process: never signalled.
        finished_run(run)
        (run / "agent.pid").write_text(f"{stranger.pid}\n")
        runner.recycle()
        assert alive(stranger) and not run.exists()
    finally:
        for p in (agent, stranger):
            p.kill()
            p.wait()
    # Without a heartbeat timeout the watcher only prunes: the newest run directory stays.
    state = tmp_path / "remote" / "idle.state"
    wait_until(lambda: len(list((tmp_path / "remote" / "runs").iterdir())) == 1 and state.exists(), timeout_s=20,
               what="the prune")
    assert state.read_text().startswith("off")


def test_an_unfinished_agent_is_not_recycled(make_runner, tmp_path):
    run = tmp_path / "remote" / "run"
    finished_run(run, state="running")
    with pytest.raises(RunnerUnavailable, match="has not finished"):
        make_runner().recycle()
    assert (run / "agent.json").exists()


def test_the_idle_watcher_powers_off_without_heartbeats_and_stands_down_for_the_next_agent(make_runner, tmp_path):
    marker = tmp_path / "powered-off"
    runner = make_runner(idle_shutdown_command=f"touch {marker}")
    remote = tmp_path / "remote"
    finished_run(remote / "run", heartbeat_timeout_s=1.5)
    runner.recycle()
    # Heartbeats keep it quiet for longer than the timeout...
    for _ in range(8):
        runner.heartbeat()
        time.sleep(0.5)
    assert not marker.exists()
    # ... and without them it runs the shutdown command.
    wait_until(lambda: (remote / "idle.state").exists(), timeout_s=20, what="the power-off")
    assert marker.exists() and (remote / "idle.state").read_text().startswith("shutdown 0")
    # Recycled again, then the next attempt's agent starts: the watcher stands down.
    marker.unlink()
    (remote / "idle.state").unlink()
    finished_run(remote / "run", heartbeat_timeout_s=1.5)
    runner.recycle()
    runner.start(AgentConfig(job_id=7, attempt=3, job_name="j", run="true", heartbeat_timeout_s=60.0))
    wait_until(lambda: (remote / "idle.state").exists(), timeout_s=20, what="the watcher to stand down")
    assert (remote / "idle.state").read_text().startswith("taken") and not marker.exists()
    status = json.loads((remote / "run" / "agent.json").read_text())
    assert status["attempt"] == 3
