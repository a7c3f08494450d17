"""Starting and signalling the job's processes. Commands always run as ``/bin/bash -c CMD``
in their own session (process group), so a signal reaches the whole tree the job spawned."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Mapping

from gpuorch.agent.protocol import METRICS_FILE, AgentConfig

RESULT_FILE = "result.json"  # in the run dir: the JSON result the job may write


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


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the process group; quiet if it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def shell_exit_code(returncode: int) -> int:
    """Popen's -N (killed by signal N) as the shell reports it, 128+N; others unchanged."""
    return 128 - returncode if returncode < 0 else returncode
