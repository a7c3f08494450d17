"""``LocalRunner``: the Runner port for local instances; the agent runs as a process on this host.

The agent's run directory is ``<instance dir>/run``. The agent is started with an argument list,
never a shell string, so job names and commands are never interpreted by a shell here.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import sys
from pathlib import Path

from gpuorch.agent.protocol import (
    CONFIG_FILE,
    HEARTBEAT_FILE,
    JOB_LOG,
    METRICS_FILE,
    STOP_FILE,
    WORK_DIR,
    AgentConfig,
    AgentStatus,
    NoticeSource,
    read_status,
    write_atomic,
)
from gpuorch.clock import utcnow
from gpuorch.errors import NotFoundError
from gpuorch.provider import InstanceState
from gpuorch.runner import Runner, RunnerUnavailable

from .instances import InstanceDir
from .procs import spawn_detached

AGENT_OUT = "agent.out"  # the agent process's own stdout/stderr (crashes before it can log)
NOTICE_POLL_S = 0.5


class LocalRunner(Runner):
    def __init__(self, instance_dir: Path, notice_poll_s: float = NOTICE_POLL_S,
                 final_checkpoint_grace_s: float | None = None) -> None:
        self.instance = InstanceDir(Path(instance_dir).resolve())
        self.rundir = self.instance.run_dir
        self.notice_poll_s = notice_poll_s  # how often the agent reads notice.json
        self.final_checkpoint_grace_s = final_checkpoint_grace_s  # None: the agent config's

    def _require(self, *states: InstanceState) -> None:
        try:
            state = self.instance.observe().state
        except NotFoundError:
            raise RunnerUnavailable(f"local instance {self.instance.id} is gone") from None
        if state not in states:
            raise RunnerUnavailable(f"local instance {self.instance.id} is {state}")

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Copy ``workdir`` into ``run/work``, write ``agent.json``, start the agent detached.

        Idempotent: ``agent.json`` is written last before the agent starts, and once it exists
        ``start`` does nothing. A crash between writing it and spawning leaves an agent that
        never runs: the daemon sees no status and gives up on the attempt, which is recoverable,
        whereas two agents on one run dir would not be. The instance's lock serialises
        concurrent starts and keeps a terminate from slipping between the check and the spawn.
        Raises RunnerUnavailable unless the instance is RUNNING.
        """
        self._require(InstanceState.RUNNING)  # settles a due preemption (which takes the lock)
        with self.instance.locked():
            # Checked again under the lock, without settling: ``end`` would need the lock too.
            now = utcnow()
            meta = self.instance.read().observed(now)
            if meta.state != InstanceState.RUNNING or meta.preemption_due(now):
                raise RunnerUnavailable(f"local instance {self.instance.id} is no longer running")
            if (self.rundir / CONFIG_FILE).exists():
                return
            self.rundir.mkdir(exist_ok=True)
            work = self.rundir / WORK_DIR
            if workdir is not None:
                shutil.copytree(workdir, work, symlinks=True, dirs_exist_ok=True)
            work.mkdir(exist_ok=True)
            notice = NoticeSource(kind="file", path=str(self.instance.notice_file), poll_s=self.notice_poll_s)
            config = dataclasses.replace(config, notice=notice)  # the caller's object stays as it was
            if self.final_checkpoint_grace_s is not None:
                config = dataclasses.replace(config, final_checkpoint_grace_s=self.final_checkpoint_grace_s)
            if config.heartbeat_timeout_s is not None and not config.shutdown_command:
                # The dead-man switch's "shut the machine down": this instance terminates itself.
                shutdown = [sys.executable, "-m", "gpuorch_local.shutdown", str(self.instance.path)]
                config = dataclasses.replace(config, shutdown_command=shlex.join(shutdown))
            write_atomic(self.rundir / CONFIG_FILE, config.to_json())
            pid = spawn_detached(
                [sys.executable, "-m", "gpuorch.agent", str(self.rundir)],
                cwd=self.rundir, log=self.rundir / AGENT_OUT, instance_dir=self.instance.path,
            )
            write_atomic(self.instance.agent_pid_file, f"{pid}\n")

    def status(self) -> AgentStatus | None:
        """The agent's last status. Still readable after the instance ended (the files stay)."""
        if not self.instance.meta_file.exists():
            raise RunnerUnavailable(f"local instance {self.instance.id} is gone")
        return read_status(self.rundir)

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self._read(JOB_LOG, offset, limit)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self._read(METRICS_FILE, offset, limit)

    def _read(self, name: str, offset: int, limit: int) -> tuple[bytes, int]:
        try:
            with open(self.rundir / name, "rb") as f:
                f.seek(offset)
                data = f.read(limit)
        except FileNotFoundError:
            return b"", offset
        return data, offset + len(data)

    def request_stop(self, deadline: float) -> None:
        """Write ``run/stop.json`` (once: the first deadline stands); see ``Runner.request_stop``.

        Raises RunnerUnavailable unless the agent was started and the instance is running.
        """
        self._require(InstanceState.RUNNING)
        if not (self.rundir / CONFIG_FILE).exists():
            raise RunnerUnavailable(f"local instance {self.instance.id} has no agent yet")
        if not (self.rundir / STOP_FILE).exists():
            write_atomic(self.rundir / STOP_FILE, json.dumps({"deadline": deadline}) + "\n")

    def heartbeat(self) -> None:
        """Touch ``run/heartbeat``; the agent's dead-man switch reads its mtime."""
        self._require(InstanceState.PENDING, InstanceState.RUNNING)
        self.rundir.mkdir(exist_ok=True)
        (self.rundir / HEARTBEAT_FILE).touch()
