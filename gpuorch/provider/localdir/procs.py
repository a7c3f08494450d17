"""Hard kills of a local instance's processes, the way a cloud's terminate stops a VM.

Every process a local instance starts carries ``GPUORCH_LOCAL_INSTANCE_DIR=<instance dir>`` in
its environment (the runner sets it on the agent; the job inherits it). That marker lets a kill
(1) refuse a recorded pid that the OS has since given to an unrelated process, and (2) find
stragglers that were never recorded, e.g. a job spawned a moment before the agent wrote its pid.
Where /proc does not exist (macOS) only the recorded process groups are killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from .isolation import RunAs, agent_env, confined, hand_over, hand_over_tree, identity_env, popen_identity, recorded

MARKER_ENV = "GPUORCH_LOCAL_INSTANCE_DIR"
# The daemon's own secrets: no process a local instance starts gets them (the job's environment
# is the agent's allow-list, gpuorch.agent.job.inherited; these and every name
# ``isolation.is_secret`` matches leave the agent's too).
DAEMON_ONLY = frozenset({"GPUORCH_API_TOKEN", "GPUORCH_DATABASE_URL"})
_PROC = Path("/proc")
_children: list[subprocess.Popen[bytes]] = []


def marker(instance_dir: Path) -> str:
    return f"{MARKER_ENV}={instance_dir}"


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs. A zombie (exited, not yet reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, someone else's
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    # Field 3, after the parenthesised command name (which may itself contain spaces).
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _environ(pid: int) -> list[bytes] | None:
    try:
        return (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None


def _belongs(pid: int, instance_dir: Path) -> bool:
    """False when ``pid`` is a live process that is not (provably or apparently) this instance's.

    A pid that no longer exists, or a zombie, belongs: the OS never hands out a pid that is still
    some process group's id, so ``killpg`` then reaches only our own survivors. Without /proc
    the record is trusted. A live process whose environment reads empty is in the middle of an
    ``exec``; it is left to ``kill_instance``'s sweep, which sees its marker once exec is done.
    """
    if not process_alive(pid):
        return True
    for _ in range(3):
        env = _environ(pid)
        if env is None:
            return True
        if env != [b""]:
            return marker(instance_dir).encode() in env
        time.sleep(0.005)
    return False


def marked_pids(instance_dir: Path) -> list[int]:
    """Every live process whose environment carries this instance's marker (Linux only)."""
    needle = marker(instance_dir).encode()
    found = []
    try:
        entries = list(_PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.isdigit() and needle in (_environ(int(entry.name)) or ()):
            found.append(int(entry.name))
    return found


def kill_instance(instance_dir: Path, group_leaders: Iterable[int | None]) -> None:
    """SIGKILL the recorded process groups, then every marked process. Never raises for the dead.

    The recorded groups go first so the agent cannot start anything more; the sweep for marked
    stragglers repeats while it finds some, because a SIGKILLed process may still be running
    for a moment after ``kill`` returns.
    """
    me = {os.getpid(), os.getpgrp()}
    _kill_groups({p for p in group_leaders if p and p > 1 and p not in me and _belongs(p, instance_dir)} - me)
    for _ in range(3):
        strays = [p for p in marked_pids(instance_dir) if p not in me and process_alive(p)]
        if not strays:
            return
        groups = set()
        for pid in strays:
            with suppress(ProcessLookupError):
                groups.add(os.getpgid(pid))
        _kill_groups(groups - me)
        for pid in strays:  # a marked process that left for a group of its own
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _kill_groups(pgids: Iterable[int]) -> None:
    for pgid in pgids:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def spawn_detached(argv: list[str], *, cwd: Path, log: Path, instance_dir: Path | None = None,
                   packages: Iterable[str] = (), run_as: RunAs | None = None) -> int:
    """Start ``argv`` in a session of its own that outlives the caller; returns its pid.

    Output goes to ``log``; with ``instance_dir`` the process (and what it starts) carries the
    instance's marker, and runs as the user the instance's record names (``isolation``), to whom
    ``cwd`` (its run directory) is handed first; ``run_as`` names one for any other process.
    PYTHONPATH gains the directories gpuorch and the top-level ``packages`` (the adapter whose
    module ``argv`` runs, e.g. ``gpuorch_sim``) were imported from, so ``python -m`` finds them
    even when they are not installed in the interpreter. No daemon secret is passed on.
    """
    import importlib

    modules = [importlib.import_module(name) for name in ("gpuorch", *packages)]
    roots = {str(Path(str(m.__file__)).resolve().parent.parent) for m in modules}
    env = {k: v for k, v in agent_env(os.environ).items() if k not in DAEMON_ONLY}  # the agent needs no secret
    env["PYTHONPATH"] = os.pathsep.join([*sorted(roots), *filter(None, [env.get("PYTHONPATH")])])
    if instance_dir is not None:
        env[MARKER_ENV] = str(instance_dir)
        run_as = run_as or recorded(instance_dir)
    user = group = extra_groups = None
    if run_as is not None:
        if instance_dir is not None and Path(cwd).parent == Path(instance_dir):
            hand_over_tree(Path(cwd), run_as)  # its run directory: the agent's files, the workdir copy
        env.update(identity_env(run_as, Path(cwd)))
        argv, (user, group, extra_groups) = confined(argv, run_as), popen_identity(run_as)
    with open(log, "ab") as out:
        if run_as is not None and instance_dir is not None and Path(log).parent == Path(cwd):
            hand_over(Path(log), run_as)
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, user=user, group=group, extra_groups=extra_groups,
        )
    # Keep the handle and reap finished children here, so a long-lived daemon collects no zombies.
    _children[:] = [p for p in _children if p.poll() is None] + [proc]
    return proc.pid
