"""The runner port: how the daemon starts the agent on an instance and reads its status and logs.

One Runner drives one instance. Implementations: ``gpuorch_local`` (processes on this host);
SSH (paramiko) for cloud VMs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from .agent.protocol import AgentConfig, AgentStatus


class RunnerUnavailable(Exception):
    """The instance cannot be reached yet (booting, network). Try again on a later pass."""


class Runner(ABC):
    @abstractmethod
    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Place the agent (and ``workdir``'s files) on the instance and start it detached.

        Idempotent: if the agent for ``config.attempt`` was already started, does nothing.
        Raises RunnerUnavailable while the instance is not reachable.
        """

    @abstractmethod
    def status(self) -> AgentStatus | None:
        """The agent's latest status, or None if it has not written one yet.

        Raises RunnerUnavailable while the instance is not reachable.
        """

    @abstractmethod
    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        """Job output from byte ``offset``; returns (data, next offset). Empty if none yet."""

    def heartbeat(self) -> None:  # noqa: B027 - optional
        """Tell the agent the control host is alive (feeds its dead-man switch)."""
