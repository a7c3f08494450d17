"""A played agent for volume jobs on fakes whose instances run nothing (Lambda, RunPod, Vast):
started, it reads what an earlier attempt left on the job's volume and writes its own line
there, through the fake's instance side (``read``/``write`` of a path on an instance, which the
fake resolves through the instance's mounts); the test says when the job is done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuorch.agent.protocol import AgentConfig
from tests.kit.agents import Agent

Read = Callable[[str, str], bytes | None]
Write = Callable[[str, str, bytes], None]


class VolumeAgent(Agent):
    """On ``start``: ``found`` is what ``$GPUORCH_VOLUME_DIR/state`` held, then the attempt's line
    is written there. ``mounted`` is the device the runner was asked to mount (None for volumes
    given at launch: the provider mounted it)."""

    def __init__(self, instance_id: str, read: Read, write: Write) -> None:
        super().__init__()
        self.instance_id, self._read, self._write = instance_id, read, write
        self.found: bytes | None = None
        self.mounted: str | None = None

    def start(self, config: AgentConfig, workdir: Any = None) -> None:
        where = config.env["GPUORCH_VOLUME_DIR"]
        self.mounted = config.volume_id
        self.found = self._read(self.instance_id, f"{where}/state")
        self._write(self.instance_id, f"{where}/state", f"step 300 written by attempt {config.attempt}\n".encode())
        super().start(config, workdir)
