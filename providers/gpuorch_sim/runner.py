"""The sim's runner for ``agents: external``: benchmarks of the daemon alone.

A thousand real agents need a thousand Python processes (~20 MB each); to measure the daemon
with that many running jobs on a small machine, ``start`` only writes ``agent.json`` and
something else (``bench/recovery.py``'s driver) plays the agent by writing ``status.json`` the
way the agent does. The daemon reads, heartbeats and mirrors logs exactly as with real agents.
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.agent.protocol import CONFIG_FILE, AgentConfig, write_atomic
from gpuorch.provider import InstanceState, RunnerUnavailable, utcnow
from gpuorch.provider.localdir import LocalRunner


class ExternalAgentRunner(LocalRunner):
    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Write ``agent.json`` once; start nothing. RunnerUnavailable unless RUNNING."""
        self._require(InstanceState.RUNNING)
        with self.instance.locked():
            if self.instance.read().observed(utcnow()).state != InstanceState.RUNNING:
                raise RunnerUnavailable(f"sim instance {self.instance.id} is no longer running")
            if (self.rundir / CONFIG_FILE).exists():
                return
            self.rundir.mkdir(exist_ok=True)
            write_atomic(self.rundir / CONFIG_FILE, config.to_json(), durable=False)  # as the sim's records
