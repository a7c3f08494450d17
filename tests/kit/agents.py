"""A played agent for tests whose instances run nothing (moto's EC2, the fake RunPod and Lambda
APIs): the reconciler talks to it as to a real agent; the test says when the job is done."""

from __future__ import annotations

from typing import Any

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.runners.port import Runner


class Agent(Runner):
    """Runs from ``start`` until ``done`` is set; keeps the config it was started with."""

    def __init__(self) -> None:
        self.started: AgentConfig | None = None
        self.done = False

    def start(self, config: AgentConfig, workdir: Any = None) -> None:
        self.started = config

    def status(self) -> AgentStatus | None:
        if self.started is None:
            return None
        if self.done:
            return AgentStatus(state="exited", exit_code=0, started_at=0.0)
        return AgentStatus(state="running", started_at=0.0, running_since=0.0)

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return b"", offset

    def request_stop(self, deadline: float) -> None:
        pass
