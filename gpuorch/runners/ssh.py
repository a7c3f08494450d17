"""``SshRunner``: the Runner port over SSH (paramiko) for cloud VMs.

Layout on the instance, under ``remote_root`` (``~/gpuorch`` by default)::

    gpuorch-agent-<hash>.pyz     the agent bundle (``gpuorch.runners.bundle``), uploaded once
    run/                         the attempt's run dir: agent.json, status.json, job.log, heartbeat
    run/work/                    the uploaded workdir; the job's working directory
    run/agent.out                the agent process's own stdout/stderr (crashes before it logs)

Files move over SFTP. The one shell command (``start_script``) runs under ``/bin/sh`` whatever
the login shell, and every path and value in it is ``shlex.quote``d; job names and commands
never appear in it at all (they travel inside agent.json). Host keys are checked against the
pinned known_hosts file only (``gpuorch.runners.hostkeys``); an unknown or changed key raises
``HostKeyRejected``. Every failure to reach or drive the instance is a ``RunnerUnavailable``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import posixpath
import re
import secrets
import shlex
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

import paramiko

from gpuorch.agent import limits
from gpuorch.agent.protocol import (
    CONFIG_FILE,
    HEARTBEAT_FILE,
    JOB_LOG,
    METRICS_FILE,
    STATUS_FILE,
    WORK_DIR,
    AgentConfig,
    AgentStatus,
    NoticeSource,
    status_from_bytes,
)
from gpuorch.runners import recycle, sftp_util
from gpuorch.runners.bundle import agent_bundle
from gpuorch.runners.connection import SshConnection
from gpuorch.runners.port import Runner, RunnerUnavailable, VolumeMountFailed, VolumeNotReady
from gpuorch.runners.recycle import AGENT_PID
from gpuorch.runners.volume_mount import NOT_YET, MountTools, mount_script
from gpuorch.runners.workdir import check_workdir

log = logging.getLogger("gpuorch.runners.ssh")
AGENT_OUT = "agent.out"
MKFS_TIMEOUT_S = 300.0  # ext4 with lazy inode tables formats a multi-TiB volume in seconds; a margin
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SshRunner(Runner):
    """Drives one instance at ``user@host:port``, logging in with the key at ``key_path``.

    - ``known_hosts_path``: the installation's pinned host keys; the host's must be pinned
      there before the first connection (``pin_host_key``).
    - ``remote_root``: absolute, or ``~/...`` (relative to the login's home directory).
    - ``python``: the instance's interpreter for the agent (3.8+; boto3 for ``s3://`` stores,
      google-cloud-storage for ``gs://``, azure-storage-blob and azure-identity for ``az://``:
      docs/checkpoints.md).
    - ``notice``: the preemption notice source written into every agent.json (none by
      default: each adapter names its own cloud's, through ``Runners(notice=...)``);
      ``shutdown_command`` fills the config's own when it has none. ``idle_shutdown_command``:
      the idle watcher's when neither names one (``recycle``; a cloud VM's power-off, never a
      pool host's).
    - ``agent_env``: extra environment for the agent process (e.g. ``GPUORCH_S3_ENDPOINT_URL``).
      Instances get cloud credentials from their own identity: never put keys here outside tests.
    - ``connect_attempts``, ``retry_wait_s``, ``retry_wait_max_s``: the bounded, jittered
      exponential retry of a connection while the instance boots; ``connect_timeout`` per try;
      ``io_timeout`` for each SFTP request or remote command.
    - ``volume_tools``: the block-device places and root commands of the volume mount step
      (``gpuorch.runners.volume_mount``; tests point them at stand-ins).

    One SSH connection is cached per runner, reconnected when it drops, and shared by the
    calls of several threads (serialised). ``close()`` releases it.
    """

    def __init__(
        self, host: str, port: int, user: str, key_path: Path, known_hosts_path: Path, *,
        remote_root: str = "~/gpuorch", python: str = "python3", notice: NoticeSource | None = None,
        shutdown_command: str | None = None, idle_shutdown_command: str | None = None,
        agent_env: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0, connect_attempts: int = 5, retry_wait_s: float = 1.0,
        retry_wait_max_s: float = 10.0, io_timeout: float = 60.0, volume_tools: MountTools | None = None,
        before_connect: Callable[[], None] | None = None,
    ) -> None:
        if not (remote_root == "~" or remote_root.startswith(("/", "~/"))):
            raise ValueError(f"remote_root {remote_root!r} must be absolute or start with ~/")
        bad = [name for name in (agent_env or {}) if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"agent_env names {bad} are not valid environment variable names")
        self.connection = SshConnection(
            host, port, user, key_path, known_hosts_path, connect_timeout=connect_timeout,
            connect_attempts=connect_attempts, retry_wait_s=retry_wait_s, retry_wait_max_s=retry_wait_max_s,
            io_timeout=io_timeout, before_connect=before_connect,
        )
        self.remote_root, self.python = remote_root, python
        self.notice = notice if notice is not None else NoticeSource(kind="none")
        self.shutdown_command = shutdown_command
        self.idle_shutdown_command = idle_shutdown_command
        self.agent_env = dict(agent_env or {})
        self.volume_tools = volume_tools
        self._root: str | None = None  # remote_root with ~ resolved, once connected

    def __repr__(self) -> str:
        return f"SshRunner({self.connection!r})"

    # -- the Runner port -----------------------------------------------------------------------

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Upload the agent bundle, ``workdir`` (into ``run/work``) and agent.json; start the agent.

        Idempotent: once ``run/agent.json`` exists, does nothing. agent.json is hard-linked into
        place by the same remote command that starts the agent, so of two concurrent starts
        exactly one starts an agent. The agent runs detached (``setsid nohup``, no stdio tied to
        the session): it survives this connection and the daemon. The runner's ``notice`` source
        replaces the config's. With ``config.volume_id`` and ``volume_dir``, the volume is
        mounted there first (``mount_script``: one look for the device, never a wait; formats
        only a blank one; idempotent) and the agent is not started unless it is mounted: raises
        VolumeNotReady (a RunnerUnavailable) while its device is not there yet, VolumeMountFailed
        when it cannot be mounted (final). PermanentError (final too) for a workdir that cannot be
        copied (``gpuorch.runners.workdir``: gone, or holding a FIFO, a device or an unreadable
        file), checked here before anything is packed. Raises RunnerUnavailable otherwise (also if
        a remote command fails, with its message: a missing Python may still be installed by the
        instance's boot).
        """
        if self.connection.call("look for the agent", lambda _client, sftp: self._started(sftp)):
            return  # the common case on every later pass: one SFTP stat, nothing packed
        shutdown = config.shutdown_command or self.shutdown_command
        config = dataclasses.replace(config, notice=self.notice, shutdown_command=shutdown)
        with tempfile.TemporaryDirectory(prefix="gpuorch-workdir-") as tmp:
            tarball = _pack(Path(workdir), Path(tmp) / "workdir.tar.gz") if workdir is not None else None
            self.connection.call("start the agent", lambda client, sftp: self._start(client, sftp, config, tarball))

    def status(self) -> AgentStatus | None:
        """The agent's ``status.json``, or None before it writes one. Raises RunnerUnavailable."""
        def read(_client: paramiko.SSHClient, sftp: paramiko.SFTPClient) -> AgentStatus | None:
            try:  # bounded: the daemon never trusts what an agent wrote (status_from_bytes)
                data = sftp_util.read_file(sftp, self._run_path(sftp, STATUS_FILE), 0, limits.STATUS_MAX_BYTES + 1)
            except FileNotFoundError:
                return None
            return status_from_bytes(data)

        return self.connection.call("read the agent status", read)

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        """Up to ``limit`` bytes of ``job.log`` from ``offset``; (b"", offset) if there is none yet."""
        def read(_client: paramiko.SSHClient, sftp: paramiko.SFTPClient) -> tuple[bytes, int]:
            try:
                data = sftp_util.read_file(sftp, self._run_path(sftp, JOB_LOG), offset, limit)
            except FileNotFoundError:
                return b"", offset
            return data, offset + len(data)

        return self.connection.call("read the job log", read)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        """Up to ``limit`` bytes of the job's metrics file from ``offset``; (b"", offset) if none yet."""
        def read(_client: paramiko.SSHClient, sftp: paramiko.SFTPClient) -> tuple[bytes, int]:
            try:
                data = sftp_util.read_file(sftp, self._run_path(sftp, METRICS_FILE), offset, limit)
            except FileNotFoundError:
                return b"", offset
            return data, offset + len(data)

        return self.connection.call("read the job's metrics", read)

    def heartbeat(self) -> None:
        """Rewrite ``run/heartbeat``: its mtime comes from the instance's clock, as the agent's
        dead-man switch compares it with its own (no clock skew between the two hosts)."""
        def touch(_client: paramiko.SSHClient, sftp: paramiko.SFTPClient) -> None:
            sftp_util.makedirs(sftp, self._run_path(sftp))
            with sftp.open(self._run_path(sftp, HEARTBEAT_FILE), "w") as f:
                f.write(f"{time.time():.3f}\n")

        self.connection.call("write the heartbeat", touch)

    def recycle(self) -> None:
        """Make the instance ready for another attempt (a warm instance, spec ``keep_warm``;
        ``gpuorch.runners.recycle``): the finished agent stopped if it still runs, the run
        directory moved aside over SFTP (``start`` then places a fresh agent, workdir and all),
        and the idle watcher started, which powers the instance off when the daemon's heartbeat
        stops while it idles. Idempotent. RunnerUnavailable while the agent has not finished, or
        the instance cannot be reached."""
        def reset(client: paramiko.SSHClient, sftp: paramiko.SFTPClient) -> None:
            recycle.recycle(client, sftp, self.connection.exec, self._root_path(sftp), self._run_path(sftp),
                            self._bundle(sftp), self.python, self.shutdown_command or self.idle_shutdown_command)

        self.connection.call("recycle the instance", reset)

    def idle_notice(self) -> float | None:
        """The deadline of a preemption notice the idle watcher heard while the instance idled
        (``recycle.idle_notice``), else None. RunnerUnavailable when it cannot be reached."""
        return self.connection.call("read the idle watcher's notice",
                                    lambda _client, sftp: recycle.idle_notice(sftp, self._root_path(sftp)))

    def close(self) -> None:
        """Close the cached connection (a later call opens a new one)."""
        self.connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- start -----------------------------------------------------------------------------------

    def _start(self, client: paramiko.SSHClient, sftp: paramiko.SFTPClient, config: AgentConfig,
               tarball: Path | None) -> None:
        if self._started(sftp):
            return
        if config.volume_id and config.volume_dir:
            self._mount_volume(client, config.volume_id, config.volume_dir)
        run = self._run_path(sftp)
        sftp_util.makedirs(sftp, posixpath.join(run, WORK_DIR))
        bundle_path = self._bundle(sftp)
        token = secrets.token_hex(8)
        config_tmp = f".{CONFIG_FILE}.{token}"
        sftp.putfo(io.BytesIO(config.to_json().encode()), posixpath.join(run, config_tmp))
        tarball_tmp = None
        if tarball is not None:
            tarball_tmp = f".workdir.{token}.tar.gz"
            sftp.put(str(tarball), posixpath.join(run, tarball_tmp))
        script = start_script(run, bundle_path, self.python, config_tmp, tarball_tmp, self.agent_env)
        code, output = self.connection.exec(client, f"/bin/sh -c {shlex.quote(script)}")
        if code != 0:
            raise RunnerUnavailable(f"{self!r}: starting the agent failed (exit {code}): {output.strip()[-500:]}")

    def _mount_volume(self, client: paramiko.SSHClient, volume_id: str, path: str) -> None:
        try:
            script = mount_script(volume_id, path, tools=self.volume_tools)
        except ValueError as e:
            raise VolumeMountFailed(volume_id, path, str(e)) from None
        # Silent while it formats a blank volume: more than io_timeout between outputs.
        timeout = self.connection.io_timeout + MKFS_TIMEOUT_S
        code, output = self.connection.exec(client, f"/bin/sh -c {shlex.quote(script)}", timeout=timeout)
        if code == 0:
            log.info("%r: %s", self, " / ".join(output.split("\n")).strip(" /"))
            return
        lines = output.strip().splitlines()
        why = (lines[-1] if lines else "").removeprefix(f"gpuorch: volume {volume_id}: ")[-500:]
        if code == NOT_YET:
            raise VolumeNotReady(volume_id, path, why)
        if code < 0:  # the channel closed without an exit status: the connection dropped
            raise RunnerUnavailable(f"{self!r}: mounting volume {volume_id} at {path}: no exit status: {why}")
        raise VolumeMountFailed(volume_id, path, f"{why or 'the mount script failed'} (exit {code})")

    def _bundle(self, sftp: paramiko.SFTPClient) -> str:
        """The agent bundle's path on the instance, uploaded unless there."""
        bundle_name, bundle = agent_bundle()
        bundle_path = posixpath.join(self._root_path(sftp), bundle_name)
        if not sftp_util.exists(sftp, bundle_path):  # content-addressed: present means complete
            sftp_util.put_atomic(sftp, io.BytesIO(bundle), bundle_path)
        return bundle_path

    def _started(self, sftp: paramiko.SFTPClient) -> bool:
        return sftp_util.exists(sftp, self._run_path(sftp, CONFIG_FILE))

    # -- paths -----------------------------------------------------------------------------------

    def _root_path(self, sftp: paramiko.SFTPClient) -> str:
        if self._root is None:
            if self.remote_root.startswith("/"):
                self._root = posixpath.normpath(self.remote_root)
            else:  # SFTP starts in the login's home directory
                self._root = posixpath.normpath(posixpath.join(sftp.normalize("."), self.remote_root[2:]))
        return self._root

    def _run_path(self, sftp: paramiko.SFTPClient, name: str = "") -> str:
        run = posixpath.join(self._root_path(sftp), "run")
        return posixpath.join(run, name) if name else run


def start_script(run: str, bundle: str, python: str, config_tmp: str, tarball_tmp: str | None,
                 env: Mapping[str, str]) -> str:
    """The ``/bin/sh`` script that unpacks the workdir, claims agent.json and starts the agent.

    Pure: every path and value is quoted. Exits 0 without starting anything if agent.json
    exists already (a concurrent or repeated start), non-zero with a message on failure.
    """
    q = shlex.quote
    assignments = " ".join(f"{name}={q(value)}" for name, value in sorted(env.items()))
    uploads = " ".join(q(name) for name in (config_tmp, tarball_tmp) if name)
    lines = [
        "set -e",
        f"cd {q(run)}",
        f"if [ -e {q(CONFIG_FILE)} ]; then rm -f {uploads}; exit 0; fi",
        (f"{q(python)} -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null"
         f" || {{ echo {q(f'the agent needs Python 3.8+ as {python!r} on the instance')} >&2; exit 127; }}"),
    ]
    if tarball_tmp is not None:
        lines += [f"tar -xzf {q(tarball_tmp)} -C {q(WORK_DIR)} --no-same-owner", f"rm -f {q(tarball_tmp)}"]
    lines += [
        # ln fails if agent.json appeared meanwhile: exactly one start gets past this line.
        f"ln {q(config_tmp)} {q(CONFIG_FILE)} 2>/dev/null || {{ rm -f {q(config_tmp)}; exit 0; }}",
        f"rm -f {q(config_tmp)}",
        # The agent outlives this session; and bash sources ~/.bashrc in any shell that sees
        # SSH_CLIENT, which would then run the login's rc files before every job command.
        "unset SSH_CLIENT SSH2_CLIENT SSH_CONNECTION SSH_TTY SSH_AUTH_SOCK SSH_ORIGINAL_COMMAND",
        f"env {assignments} setsid nohup {q(python)} {q(bundle)} {q(run)} >{q(AGENT_OUT)} 2>&1 </dev/null &",
        f"echo $! >{q(AGENT_PID)}",  # a recycle stops an agent that outlived its status (gpuorch.runners.recycle)
    ]
    return "\n".join(lines) + "\n"


def _pack(workdir: Path, target: Path) -> Path:
    """``workdir``'s contents as a gzipped tar (symlinks and modes kept, owners dropped)."""
    # It may have changed since submit. The rule of a local copy: no FIFO or device reaches the
    # instance (tar would pack one as such), and no file this host cannot read.
    check_workdir(workdir)

    def anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(target, "w:gz") as tar:
        for child in sorted(workdir.iterdir()):
            tar.add(child, arcname=child.name, filter=anonymous)
    return target
