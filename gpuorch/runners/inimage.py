"""The runner of an instance that is itself the job's container (a RunPod pod, a Vast instance).

Such a provider starts the instance from the job's ``image:`` at launch (``LaunchRequest.image``);
there is no container runtime inside it, and none is needed: the agent already stands in the
job's image. ``InImageRunner`` wraps the SSH runner of that instance and starts the agent with
the agent config's ``container`` removed, so ``setup`` and ``run`` execute directly in the
instance, under the agent as without an image: the checkpoint signal, the uploads and the
dead-man switch (whose shutdown ends the container) work unchanged. Everything else is the
wrapped runner's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.runners.port import Runner


class InImageRunner(Runner):
    """``runner`` with the job's container dropped from the config it starts: the instance is it."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def __repr__(self) -> str:
        return f"InImageRunner({self.runner!r})"

    def __getattr__(self, name: str) -> Any:  # close() and whatever else the wrapped runner has
        return getattr(self.runner, name)

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """``Runner.start`` with ``config.container`` None: the image is already running the agent."""
        if config.container is not None:
            config = dataclasses.replace(config, container=None)
        self.runner.start(config, workdir)

    def status(self) -> AgentStatus | None:
        return self.runner.status()

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.runner.read_log(offset, limit)

    def heartbeat(self) -> None:
        self.runner.heartbeat()

    def request_stop(self, deadline: float) -> None:
        self.runner.request_stop(deadline)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.runner.read_metrics(offset, limit)
