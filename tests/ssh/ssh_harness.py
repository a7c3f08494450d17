"""Helpers for the SSH runner tests (fixtures are in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuorch.agent.protocol import AgentConfig, AgentStatus, read_status
from gpuorch.runners.ssh import SshRunner


@dataclass
class Keys:
    job_key: Path  # the login key (private)
    job_public: str
    host_private: str  # the sshd's host key
    host_public: str


def kill_job(rundir: Path) -> None:
    """Stop a job still running at teardown (its agent then exits on its own)."""
    status = read_status(rundir) if rundir.is_dir() else None
    if status is not None and status.pid and status.state not in ("exited", "failed"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(status.pid, signal.SIGKILL)


def config(**fields) -> AgentConfig:  # type: ignore[no-untyped-def]
    fields.setdefault("job_id", 1)
    fields.setdefault("attempt", 1)
    fields.setdefault("job_name", "test-job")
    fields.setdefault("run", "true")
    return AgentConfig(**fields)


def wait_status(runner: SshRunner, condition: Callable[[AgentStatus], bool], timeout: float = 15.0) -> AgentStatus:
    """Poll the runner's status until ``condition`` holds; fail with the remote logs if it never does."""
    end = time.monotonic() + timeout
    status = None
    while time.monotonic() < end:
        status = runner.status()
        if status is not None and condition(status):
            return status
        time.sleep(0.1)
    rundir = Path(runner.remote_root) / "run"
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted(rundir.glob("*.out")) + sorted(rundir.glob("*.log")))
    pytest.fail(f"condition not reached; status: {status}\n{logs}")
