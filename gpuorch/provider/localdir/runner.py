"""``LocalRunner``: the Runner port for local instances; the agent runs as a process on this host.

The agent's run directory is ``<instance dir>/run``. The agent is started with an argument list,
never a shell string, so job names and commands are never interpreted by a shell here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from gpuorch.agent.container import ContainerConfig
from gpuorch.agent.protocol import (
    CONFIG_FILE,
    HEARTBEAT_FILE,
    JOB_LOG,
    METRICS_FILE,
    STATUS_FILE,
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
from gpuorch.provider.port import InstanceState
from gpuorch.runners.port import Runner, RunnerCapabilities, RunnerUnavailable
from gpuorch.runners.workdir import check_workdir

from .instances import InstanceDir
from .procs import spawn_detached

AGENT_OUT = "agent.out"  # the agent process's own stdout/stderr (crashes before it can log)
NOTICE_POLL_S = 0.5
SETTLE_S = 1.0  # status.json older than this is cached by (inode, mtime, size)


class LocalRunner(Runner):
    capabilities = RunnerCapabilities(listed_heartbeat=True)

    def __init__(self, instance_dir: Path, notice_poll_s: float = NOTICE_POLL_S,
                 final_checkpoint_grace_s: float | None = None, container: ContainerConfig | None = None) -> None:
        # ``container``: this host's runtime, its flags and GPU mode for a job's ``image:`` (its
        # ``image`` is ignored); None: the agent detects docker or podman.
        self.container = container
        path = Path(instance_dir)  # the providers' are absolute (their resolved home's): no realpath a runner
        self.instance = InstanceDir(path if path.is_absolute() else path.resolve())
        self.rundir = self.instance.run_dir
        self.notice_poll_s = notice_poll_s  # how often the agent reads notice.json
        self.final_checkpoint_grace_s = final_checkpoint_grace_s  # None: the agent config's
        self._status: tuple[tuple[int, int, int], AgentStatus] | None = None  # (stat key, parsed)
        self._paths: dict[str, str] = {}  # str, not Path: a daemon keeps a runner per instance

    def _path(self, name: str) -> str:
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = os.path.join(self.rundir, name)
        return path

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
        Raises RunnerUnavailable unless the instance is RUNNING (or while a copy fails for what may
        clear: a full disk here, a file changed meanwhile), PermanentError ``InvalidWorkdir`` for
        a workdir that cannot be copied at all (``gpuorch.runners.workdir``): gone, or holding a
        FIFO, a device or an unreadable file.
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
            if workdir is not None:  # it may have changed since submit: checked before anything is copied
                check_workdir(workdir)
            self.rundir.mkdir(exist_ok=True)
            work = self.rundir / WORK_DIR
            if workdir is not None:
                try:
                    shutil.copytree(workdir, work, symlinks=True, dirs_exist_ok=True)
                except OSError as e:  # the check passed: a race or this host's disk, which may clear
                    raise RunnerUnavailable(f"workdir {workdir}: copying it failed: {' '.join(str(e).split())[:300]}"
                                            ) from None
            work.mkdir(exist_ok=True)
            notice = NoticeSource(kind="file", path=str(self.instance.notice_file), poll_s=self.notice_poll_s)
            config = dataclasses.replace(config, notice=notice)  # the caller's object stays as it was
            if config.container is not None and self.container is not None:
                config = dataclasses.replace(config, container=dataclasses.replace(
                    self.container, image=config.container.image))
            if self.final_checkpoint_grace_s is not None:
                config = dataclasses.replace(config, final_checkpoint_grace_s=self.final_checkpoint_grace_s)
            if config.heartbeat_timeout_s is not None and not config.shutdown_command:
                # The dead-man switch's "shut the machine down": this instance terminates itself.
                shutdown = [sys.executable, "-m", "gpuorch.provider.localdir.shutdown", str(self.instance.path)]
                config = dataclasses.replace(config, shutdown_command=shlex.join(shutdown))
            write_atomic(self.rundir / CONFIG_FILE, config.to_json())
            pid = spawn_detached(
                [sys.executable, "-m", "gpuorch.agent", str(self.rundir)],
                cwd=self.rundir, log=self.rundir / AGENT_OUT, instance_dir=self.instance.path,
            )
            write_atomic(self.instance.agent_pid_file, f"{pid}\n")

    def recycle(self) -> None:
        """Make the instance ready for another attempt (a warm instance, spec ``keep_warm``): the
        finished agent's run directory's entries move to ``<instance>/runs/<n>/``, so ``start``
        places a fresh agent and ``status`` says nothing until it has. Idempotent: an empty run
        directory is left as it is; a crash midway leaves the rest for the next call. Raises
        RunnerUnavailable unless the instance is running, or while its agent has not finished."""
        self._require(InstanceState.RUNNING)
        with self.instance.locked():
            entries = sorted(self.rundir.iterdir()) if self.rundir.is_dir() else []
            if not entries:
                return
            status = read_status(self.rundir)
            if (self.rundir / CONFIG_FILE).exists() and (status is None or status.state not in ("exited", "failed")):
                raise RunnerUnavailable(f"local instance {self.instance.id}: its agent has not finished")
            done = self.instance.path / "runs"
            done.mkdir(exist_ok=True)
            dest = done / str(1 + sum(1 for _ in done.iterdir()))
            dest.mkdir()
            for entry in entries:
                os.replace(entry, dest / entry.name)
            self._status = None

    def status(self) -> AgentStatus | None:
        """The agent's last status. Still readable after the instance ended (the files stay).

        Parsed again only when ``status.json`` changed: a runner kept across passes (providers
        reuse theirs) pays one ``stat`` for an agent with nothing new to say. A file written
        less than ``SETTLE_S`` ago is always read again, so a rewrite within the file system's
        timestamp granularity (same size, reused inode) is never missed.
        """
        if not self.instance.meta_file.exists():
            raise RunnerUnavailable(f"local instance {self.instance.id} is gone")
        return self.listed_status()

    def listed_status(self) -> AgentStatus | None:
        """``status`` of an instance whose record the caller has just seen (its provider's
        listing, this pass): the same answer without looking for the record again."""
        try:
            st = os.stat(self._path(STATUS_FILE))
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._status is not None and self._status[0] == key:
            return self._status[1]
        status = read_status(self.rundir)
        settled = time.time() - st.st_mtime > SETTLE_S
        self._status = (key, status) if settled and status is not None else None
        return status

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self._read(JOB_LOG, offset, limit)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self._read(METRICS_FILE, offset, limit)

    def _read(self, name: str, offset: int, limit: int) -> tuple[bytes, int]:
        path = self._path(name)
        try:
            if os.stat(path).st_size <= offset:  # nothing new: a stat, not an open
                return b"", offset
            with open(path, "rb") as f:
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

    def listed_heartbeat(self) -> None:
        """``heartbeat`` for an instance its provider's listing has just returned alive (this
        pass's): the same touch without reading the record again, which was most of a heartbeat's
        cost (10,000 jobs send 333 a second)."""
        try:
            os.utime(self._path(HEARTBEAT_FILE))
        except FileNotFoundError:  # the first one
            self.heartbeat()
