"""Running the configs/examples training scripts the way the agent does (own process group, the
agent's variables), interrupting them with the notice signal, and reading their result."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gpuorch.agent.job import notify_job, proc_table
from gpuorch.integrations.protocol import complete_checkpoints
from gpuorch.testing.contract import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"


def require(*modules: str) -> None:
    """Skip the calling module unless every framework is installed, without importing any: torch
    stays out of the pytest worker (its threads in a long-lived worker segfaulted it under CI, and
    xdist's loadfile scheduling can hang on a crashed worker); the training runs in child processes."""
    import pytest

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: the workloads extra (pip install -e '.[workloads]')",
                    allow_module_level=True)


def python(code: str, *args: str, timeout_s: float = 300) -> str:
    """Run ``code`` in a fresh interpreter (one thread) and return what it printed; fails on a non-zero exit."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def command(script: Path, nproc: int) -> list[str]:
    if nproc == 1:
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(script)]


def start(script: Path, root: Path, env: dict[str, str], tag: str, nproc: int = 1) -> subprocess.Popen[bytes]:
    run_env = {**os.environ, **env, "GPUORCH_CHECKPOINT_DIR": str(root / f"{tag}-ckpt"),
               "GPUORCH_RESULT_FILE": str(root / f"{tag}.json"), "GPUORCH_CHECKPOINT_SIGNAL": "SIGUSR1",
               "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = open(root / f"{tag}.log", "ab")  # noqa: SIM115 - the child keeps it
    return subprocess.Popen(command(script, nproc), cwd=script.parent, env=run_env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen[bytes], root: Path, tag: str, timeout_s: float = 480) -> dict:
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(proc)  # a hung rank would otherwise outlive the test and load the rest of the suite
        raise
    assert code == 0, (root / f"{tag}.log").read_text()[-3000:]
    return json.loads((root / f"{tag}.json").read_text())


def run(script: Path, root: Path, env: dict[str, str], tag: str, nproc: int = 1) -> dict:
    return finish(start(script, root, env, tag, nproc), root, tag)


def steps(root: Path, prefix: str) -> list[int]:
    out = []
    for d in complete_checkpoints(root, prefix):
        out.append(json.loads((d / "COMPLETE").read_text())["step"])
    return out


def interrupt(proc: subprocess.Popen[bytes], ckpt: Path, prefix: str, periodic: int) -> int:
    """Wait for the first periodic checkpoint, send the notice, wait for the checkpoint it causes
    (a step that is no multiple of ``periodic``), then kill the whole job: a preemption. Returns
    the step of the newest complete checkpoint then, the one a resume takes: under DDP a notice
    that reaches one rank while the save it caused runs asks for one more at the next step
    (``integrations.pytorch``: the notice is cleared before the state is taken), and on a loaded
    machine that one is written before the kill (one CI run: step-62, then step-63)."""
    wait_until(lambda: steps(ckpt, prefix) != [] or proc.poll() is not None, timeout_s=240,
               what="the first checkpoint")
    assert proc.poll() is None, "the run ended before it could be interrupted"
    notify_job(proc, signal.SIGUSR1)
    extra = wait_until(lambda: [s for s in steps(ckpt, prefix) if s % periodic] or proc.poll() is not None,
                       timeout_s=120, what="the checkpoint the notice asks for")
    assert proc.poll() is None, "the run ended instead of checkpointing on the notice"
    kill_tree(proc)
    return max([*steps(ckpt, prefix), *extra])


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's group and every descendant (torchrun's workers live in sessions of
    their own), by pid, as a reclaimed instance loses them all at once."""
    table = proc_table() or {}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = [], [proc.pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
