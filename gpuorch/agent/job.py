"""Starting and signalling the job's processes. Commands always run as ``/bin/bash -c CMD``
in their own session (process group), so a signal reaches the whole tree the job spawned."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from gpuorch.agent import limits
from gpuorch.agent.protocol import CONTAINERS_FILE, METRICS_FILE, AgentConfig

RESULT_FILE = "result.json"  # in the run dir: the JSON result the job may write
log = logging.getLogger("gpuorch.agent")


def read_result(rundir: Path) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The job's ``result.json`` within ``gpuorch.agent.limits`` as ``(result, why dropped)``: a
    file over the size or depth limit, or not JSON, becomes a ``dropped`` record (the job's exit
    code stands) and the line saying why, also logged. Never raises for what the job wrote."""
    result, why = limits.read_result(rundir / RESULT_FILE)
    if why is not None:
        log.warning("%s", why)
    return result, why


def parse_signal(name: str) -> signal.Signals:
    """``SIGUSR1``, ``usr1`` -> ``signal.SIGUSR1``; ValueError naming the field otherwise."""
    key = name.upper() if name.upper().startswith("SIG") else "SIG" + name.upper()
    try:
        return signal.Signals[key]
    except KeyError:
        raise ValueError(f"signal {name!r} is not a signal name; use one like SIGUSR1") from None


# What a job inherits from the agent's environment (docs/operations.md "Security"): what programs
# need to run (paths, locale, terminal, temp dir, the GPU runtime's device selection), nothing
# that authenticates. The daemon's cloud credentials, API token and database URL stay out: on
# the local and sim providers the agent runs with the daemon's own environment.
INHERITED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
    "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "HIP_VISIBLE_DEVICES",
    "GPUORCH_LOCAL_INSTANCE_DIR",  # the local instance's process marker: its kill finds the job by it
})
# locale, and the math and GPU runtimes' tuning (thread counts, BLAS core type: they change results)
INHERITED_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA_", "NCCL_")


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` a job may see: ``INHERITED`` and ``INHERITED_PREFIXES``."""
    return {k: v for k, v in environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


def job_env(config: AgentConfig, rundir: Path, checkpoint_dir: Path, resumed_from: str | None) -> dict[str, str]:
    """The allow-listed part of os.environ (``inherited``) + the job's env + the GPUORCH_*
    variables (which win). Nothing else of the agent's environment reaches the job."""
    env = inherited(os.environ)
    env.update(config.env)
    env.update(
        GPUORCH_CHECKPOINT_DIR=str(checkpoint_dir.resolve()),
        GPUORCH_JOB_ID=str(config.job_id),
        GPUORCH_ATTEMPT=str(config.attempt),
        GPUORCH_JOB_NAME=config.job_name,
        GPUORCH_RESULT_FILE=str((rundir / RESULT_FILE).resolve()),
        GPUORCH_METRICS_FILE=str((rundir / METRICS_FILE).resolve()),
        GPUORCH_CHECKPOINT_SIGNAL=parse_signal(config.signal).name,  # gpuorch.integrations listens for it
    )
    env.pop("GPUORCH_RESUMED_FROM", None)
    if resumed_from:
        env["GPUORCH_RESUMED_FROM"] = resumed_from
    return env


def spawn(
    command: str, cwd: Path, env: Mapping[str, str], log_path: Path, survive: signal.Signals | None = None
) -> subprocess.Popen[bytes]:
    """Start ``command`` under bash in a new session, output appended to ``log_path``.

    With ``survive``, bash first installs a no-op trap for that signal: a command like
    ``cd src && python train.py`` keeps bash as the parent, and bash's default action for
    SIGUSR1 (exit) would make the job look finished while python still runs. A trap (unlike
    an ignore) is reset to the default in the children bash starts, so the job is unaffected.
    """
    argv = ["/bin/bash", "-c", command]
    if survive is not None:
        argv[2] = f"trap : {survive.name}\n{command}"  # survive.name is one of signal.Signals
    return spawn_argv(argv, cwd, env, log_path)


def spawn_argv(argv: List[str], cwd: Path, env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (process group), output appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def proc_table() -> Optional[Dict[int, Tuple[int, int, int]]]:
    """``{pid: (ppid, pgid, caught-signal mask)}`` from /proc; None without /proc."""
    table: Dict[int, Tuple[int, int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            pgid = os.getpgid(int(name))
        except (OSError, ValueError):
            continue
        try:
            table[int(name)] = (int(fields["PPid"]), pgid, int(fields["SigCgt"].strip(), 16))
        except (KeyError, ValueError):
            continue
    return table


def notice_targets(root: int, sig: int, table: Mapping[int, Tuple[int, int, int]]) -> List[int]:
    """Which of the job's processes get the checkpoint signal (pure; ``table`` as ``proc_table``).

    The job's processes: its process group (``root`` leads it) and every descendant of
    ``root``, in whatever group (torchrun starts its workers in sessions of their own). Each
    gets the signal, except a process that does not catch it while one of its descendants does:
    such a launcher (torchrun, a ``python -m`` wrapper) would die of the default action and take
    the workers that are about to checkpoint with it.
    """
    bit = 1 << (sig - 1)
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    job = {pid for pid, (_, pgid, _) in table.items() if pgid == root}
    seen, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    job |= seen
    catches = {pid for pid in job if pid in table and table[pid][2] & bit}
    spared = set()
    for pid in catches:
        up = table[pid][0]
        while up in job and up not in spared:
            spared.add(up)
            up = table[up][0] if up in table else 0
    return sorted(pid for pid in job if pid in catches or pid not in spared)


def notify_job(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send the checkpoint signal to the job's processes (``notice_targets``); the whole
    process group where /proc cannot say who catches it. Quiet for processes already gone."""
    table = proc_table()
    if table is None or proc.pid not in table:
        signal_group(proc, sig)
        return
    for pid in notice_targets(proc.pid, sig, table):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the process group; quiet if it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def shell_exit_code(returncode: int) -> int:
    """Popen's -N (killed by signal N) as the shell reports it, 128+N; others unchanged."""
    return 128 - returncode if returncode < 0 else returncode


def remove_containers(rundir: Path, timeout_s: float = 30.0) -> None:
    """Force-remove every container the agent recorded in ``rundir`` (``CONTAINERS_FILE``).

    A container outlives a SIGKILLed runtime client, so whoever kills the agent's processes
    without the agent's help (the local provider's terminate) calls this. Quiet: containers that
    are gone already, a missing runtime, a timeout.
    """
    from gpuorch.agent.container import remove_argv

    try:
        lines = (rundir / CONTAINERS_FILE).read_text().splitlines()
    except OSError:
        return
    for line in lines:
        try:
            record = json.loads(line)
            argv = remove_argv(record["runtime"], record["name"])
        except (ValueError, KeyError, TypeError):
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout_s, check=False)
