"""Test harness: run the real agent (``python -m gpuorch.agent``) as a subprocess in a temp run
dir and wait for conditions on its status.json. Fixtures are in conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuorch.agent.protocol import AgentStatus, read_status

REPO = Path(__file__).resolve().parents[2]
FAKE_JOB = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('fake_job.py')))}"
TINY_MLP = REPO / "configs" / "examples" / "tiny_mlp" / "train.py"


class AgentRun:
    """One agent process and its run dir."""

    def __init__(self, rundir: Path, proc: subprocess.Popen) -> None:
        self.rundir, self.proc = rundir, proc

    @property
    def work(self) -> Path:
        return self.rundir / "work"

    def status(self) -> AgentStatus | None:
        return read_status(self.rundir)

    def wait_for(self, condition: Callable[[AgentStatus], bool], timeout: float = 20.0) -> AgentStatus:
        """Poll status.json until ``condition`` holds; fail with the logs if it never does."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            exited = self.proc.poll() is not None  # checked first: the read below is then final
            status = self.status()
            if status is not None and condition(status):
                return status
            if exited:
                break
            time.sleep(0.05)
        pytest.fail(f"condition not reached; status: {self.status()}\n{self.logs()}")

    def wait_job_ready(self, timeout: float = 20.0) -> None:
        """Wait until the fake job has installed its signal handler (it then writes env.json)."""
        self.wait_for(lambda s: s.state == "running" and (self.work / "env.json").exists(), timeout)

    def wait_exit(self, timeout: float = 20.0) -> AgentStatus:
        status = self.wait_for(lambda s: s.state in ("exited", "failed"), timeout)
        self.proc.wait(timeout=timeout)
        return status

    def logs(self) -> str:
        parts = []
        for name in ("agent.log", "job.log", "agent.out"):
            path = self.rundir / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def kill(self) -> None:
        """SIGKILL the agent and the job's process group: the machine vanishing."""
        status = self.status()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if status is not None and status.pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(status.pid, signal.SIGKILL)


def job_env_seen(run: AgentRun) -> dict:
    """The GPUORCH_* variables the fake job saw."""
    return json.loads((run.work / "env.json").read_text())
