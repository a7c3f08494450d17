"""The sim's runner for ``agents: external``: benchmarks of the daemon alone.

A thousand real agents need a thousand Python processes (~20 MB each); to measure the daemon
with that many running jobs on a small machine, ``start`` only writes ``agent.json`` and
something else (``bench/recovery.py``'s driver) plays the agent by writing ``status.json`` the
way the agent does. The daemon reads, heartbeats and mirrors logs exactly as with real agents.
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.agent.protocol import CONFIG_FILE, AgentConfig, write_atomic
from gpuorch.errors import NotFoundError
from gpuorch.provider import InstanceState, RunnerUnavailable, utcnow
from gpuorch.provider.localdir import LocalRunner


class ExternalAgentRunner(LocalRunner):
    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Write ``agent.json`` once; start nothing. RunnerUnavailable unless RUNNING.

        The record is read once, under the instance's lock (``LocalRunner.start`` reads it
        before and again under the lock); a preemption found due is settled after the lock is
        let go (``InstanceDir.end`` takes it), as ``_require`` does, and the start refused."""
        try:
            with self.instance.locked():
                now = utcnow()
                meta = self.instance.read().observed(now)
                due = meta.preemption_due(now)
                if not due:
                    if meta.state != InstanceState.RUNNING:
                        raise RunnerUnavailable(f"sim instance {self.instance.id} is {meta.state}")
                    if (self.rundir / CONFIG_FILE).exists():
                        return
                    self.rundir.mkdir(exist_ok=True)
                    # As the sim's records (not fsync'd); compact: an indent was a tenth of an agent
                    # start in a queue drain.
                    write_atomic(self.rundir / CONFIG_FILE, config.to_json(indent=None), durable=False)
                    return
        except NotFoundError:
            raise RunnerUnavailable(f"sim instance {self.instance.id} is gone") from None
        self._require(InstanceState.RUNNING)  # settles the due preemption: raises RunnerUnavailable
        raise RunnerUnavailable(f"sim instance {self.instance.id} is no longer running")
