"""Recycling an SSH instance for another attempt (a warm instance, spec ``keep_warm``;
docs/money.md, "Warm capacity"): ``SshRunner.recycle``'s steps, over one SSH connection.

1. The finished attempt's agent is gone: its status says ``exited`` or ``failed`` (else
   RunnerUnavailable: not finished, tried again later), and a process still running as that agent
   (``run/agent.pid``, checked against its command line so a reused pid is never hit) is stopped:
   its process group SIGTERMed, SIGKILLed after ``STOP_GRACE_S``.
2. ``idle.json`` (``gpuorch.agent.idle.IdleConfig``: the run directory, and the finished agent's
   ``heartbeat_timeout_s``, shutdown command (else the runner's) and notice source) is written over
   SFTP, atomically; an ``idle.notice`` of an earlier idle period is removed (the watcher hears a
   notice that still stands again).
3. The run directory moves aside to ``runs/<attempt>-<job>-<token>`` (an SFTP rename): the next
   ``start`` finds no ``agent.json`` and places a fresh agent there, as on a new instance (workdir
   upload, checkpoint restore).
4. The idle watcher (``python -m gpuorch.agent.idle``, from the agent bundle) starts detached. It
   powers the instance off when the daemon's heartbeat stops while it idles; it exits when the next
   agent starts; it removes the run directories set aside before the newest; it reports a
   preemption notice heard while idle in ``idle.notice``, which ``idle_notice`` reads.

Each step is idempotent, so a crash midway is finished by the next call. The shell scripts hold
only paths the runner made and integers it parsed, each ``shlex.quote``d; the shutdown command and
every other value travel in files written over SFTP.
"""

from __future__ import annotations

import io
import json
import math
import posixpath
import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict

import paramiko

from gpuorch.agent import limits
from gpuorch.agent.idle import IDLE_FILE, IDLE_NOTICE, RUNS_DIR, IdleConfig
from gpuorch.agent.protocol import CONFIG_FILE, STATUS_FILE, AgentConfig, status_from_bytes
from gpuorch.runners import sftp_util
from gpuorch.runners.port import RunnerUnavailable

AGENT_PID = "agent.pid"  # written by the start script: the detached agent's pid (its process group)
STOP_GRACE_S = 5
CONFIG_MAX_BYTES = 1 << 20
NOTICE_MAX_BYTES = 4096
FINISHED = ("exited", "failed")

Exec = Callable[[paramiko.SSHClient, str], tuple[int, str]]


def stop_script(run: str, pid: int) -> str:
    """``/bin/sh`` script: stop process ``pid`` and its group if it still runs as the agent of ``run``
    (its command line has ``run`` as an argument); exit 0 whether or not there was one."""
    q = shlex.quote
    return "\n".join([
        f"p={int(pid)}",
        '[ -r "/proc/$p/cmdline" ] || exit 0',
        f"tr '\\000' '\\n' <\"/proc/$p/cmdline\" | grep -qxF -- {q(run)} || exit 0",
        'kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || exit 0',
        f'i=0; while [ $i -lt {STOP_GRACE_S * 10} ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i+1)); done',
        'kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true',
    ]) + "\n"


def idle_script(root: str, bundle: str, python: str, idle: str) -> str:
    """``/bin/sh`` script: start the idle watcher detached (it outlives the session and the daemon)."""
    q = shlex.quote
    return "\n".join([
        "set -e",
        f"cd {q(root)}",
        "unset SSH_CLIENT SSH2_CLIENT SSH_CONNECTION SSH_TTY SSH_AUTH_SOCK SSH_ORIGINAL_COMMAND",
        f"PYTHONPATH={q(bundle)} setsid nohup {q(python)} -m gpuorch.agent.idle {q(idle)} >idle.out 2>&1 </dev/null &",
    ]) + "\n"


def _read(sftp: paramiko.SFTPClient, path: str, most: int) -> bytes | None:
    try:
        return sftp_util.read_file(sftp, path, 0, most)
    except FileNotFoundError:
        return None


def set_aside(client: paramiko.SSHClient, sftp: paramiko.SFTPClient, exec_: Exec, root: str, run: str,
              shutdown_command: str | None) -> bool:
    """Steps 1-3 for the agent in ``run``: False when there was none (nothing to set aside).
    RunnerUnavailable while its agent has not finished."""
    raw = _read(sftp, posixpath.join(run, CONFIG_FILE), CONFIG_MAX_BYTES)
    if raw is None:
        return False
    data = _read(sftp, posixpath.join(run, STATUS_FILE), limits.STATUS_MAX_BYTES + 1)
    status = status_from_bytes(data) if data is not None else None
    if status is None or status.state not in FINISHED:
        raise RunnerUnavailable(f"{run}: its agent has not finished (state {status.state if status else 'none'})")
    pid = _read(sftp, posixpath.join(run, AGENT_PID), 64)
    if pid is not None and pid.strip().isdigit() and int(pid) > 1:
        code, output = exec_(client, f"/bin/sh -c {shlex.quote(stop_script(run, int(pid)))}")
        if code != 0:
            raise RunnerUnavailable(f"{run}: stopping its agent failed (exit {code}): {output.strip()[-300:]}")
    try:
        config: AgentConfig | None = AgentConfig.from_json(raw.decode())
    except (ValueError, TypeError, UnicodeDecodeError):
        config = None  # damaged: no dead-man switch to carry over, but the directory still goes
    notice = asdict(config.notice) if config and config.notice.kind != "none" else None
    idle = IdleConfig(run=run, heartbeat_timeout_s=config.heartbeat_timeout_s if config else None,
                      shutdown_command=(config.shutdown_command if config else None) or shutdown_command,
                      notice=notice)
    try:  # an earlier idle period's report: this period's watcher hears a notice that still stands
        sftp.remove(posixpath.join(root, IDLE_NOTICE))
    except FileNotFoundError:
        pass
    sftp_util.put_atomic(sftp, io.BytesIO(idle.to_json().encode()), posixpath.join(root, IDLE_FILE))
    runs = posixpath.join(root, RUNS_DIR)
    sftp_util.makedirs(sftp, runs)
    name = f"{config.attempt}-{config.job_id}" if config else "unknown"
    sftp.rename(run, posixpath.join(runs, f"{name}-{secrets.token_hex(4)}"))
    return True


def recycle(client: paramiko.SSHClient, sftp: paramiko.SFTPClient, exec_: Exec, root: str, run: str, bundle: str,
            python: str, shutdown_command: str | None) -> None:
    """Steps 1-4 (the module's docstring). ``bundle``: the agent bundle's path on the instance
    (present); ``shutdown_command``: the runner's, for an agent whose config named none."""
    set_aside(client, sftp, exec_, root, run, shutdown_command)
    idle = posixpath.join(root, IDLE_FILE)
    if not sftp_util.exists(sftp, idle):
        return  # no agent ever finished here: nothing to watch
    code, output = exec_(client, f"/bin/sh -c {shlex.quote(idle_script(root, bundle, python, idle))}")
    if code != 0:
        raise RunnerUnavailable(f"{root}: starting the idle watcher failed (exit {code}): {output.strip()[-300:]}")


def idle_notice(sftp: paramiko.SFTPClient, root: str) -> float | None:
    """The deadline of a preemption notice the idle watcher reported (``idle.notice``), or None.
    A report that cannot be read as one still says a notice came: its deadline is now."""
    data = _read(sftp, posixpath.join(root, IDLE_NOTICE), NOTICE_MAX_BYTES)
    if data is None:
        return None
    try:
        deadline = json.loads(data).get("deadline")
    except (ValueError, AttributeError, UnicodeDecodeError):
        deadline = None
    if isinstance(deadline, int | float) and not isinstance(deadline, bool) and math.isfinite(deadline):
        return float(deadline)
    return time.time()
