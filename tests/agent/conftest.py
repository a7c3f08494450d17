"""Fixtures for the agent tests (the harness itself is agent_harness.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_harness import REPO, AgentRun

from gpuorch.agent.protocol import AgentConfig, NoticeSource


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Callable[..., AgentRun]]:
    """``start_agent(name, run=..., **AgentConfig fields)`` -> a running AgentRun."""
    runs: list[AgentRun] = []

    def start(name: str = "run", *, notice: dict | None = None, **fields) -> AgentRun:
        rundir = tmp_path / name
        rundir.mkdir()
        fields.setdefault("job_id", 1)
        fields.setdefault("attempt", 1)
        fields.setdefault("job_name", "test-job")
        config = AgentConfig(notice=NoticeSource(**(notice or {})), **fields)
        (rundir / "agent.json").write_text(config.to_json())
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(rundir / "agent.out", "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gpuorch.agent", str(rundir)],
                cwd=str(REPO),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        run = AgentRun(rundir, proc)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.kill()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return (tmp_path / "store").as_uri()


@pytest.fixture
def imds() -> Iterator:
    from fake_imds import FakeImds

    server = FakeImds()
    yield server
    server.close()


@pytest.fixture
def scheduled_events() -> Iterator:
    from fake_scheduled_events import FakeScheduledEvents

    server = FakeScheduledEvents()
    yield server
    server.close()
