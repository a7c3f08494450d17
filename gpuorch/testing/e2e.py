"""Helpers of the end-to-end tests: drive a reconciler until a condition holds, read a job's
status, and compute the tiny_mlp example's result without gpuorch (the reference a resumed run
must match bitwise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuorch.jobs import intent as jobs
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Job, JobStatus
from gpuorch.testing.contract import wait_until

TINY_MLP = Path(__file__).resolve().parents[2] / "configs" / "examples" / "tiny_mlp"


def passes_until(step: Callable[[], object], check: Callable[[], Any], *, timeout_s: float = 120.0,
                 what: str = "the daemon's progress") -> Any:
    """Run ``step`` (a reconcile pass) every 0.2 s until ``check`` holds; return what it returned."""
    def once() -> Any:
        step()
        return check()
    return wait_until(once, timeout_s=timeout_s, step_s=0.2, what=what)


def job_status(store: Store, job_id: int) -> JobStatus:
    with store.read() as s:
        return s.get(Job, job_id).status  # type: ignore[union-attr]


def attempts(store: Store, job_id: int) -> list[Attempt]:
    with store.read() as s:
        return jobs.attempts_of(s, job_id)


def tiny_mlp_reference(tmp_path: Path, env: Mapping[str, str], tag: str = "ref") -> float:
    """The final loss of an uninterrupted run of tiny_mlp with ``env``, run directly."""
    result = tmp_path / f"{tag}.json"
    run_env = {**os.environ, **env, "STEP_SLEEP": "0", "GPUORCH_CHECKPOINT_DIR": str(tmp_path / f"{tag}-ckpt"),
               "GPUORCH_RESULT_FILE": str(result)}
    subprocess.run([sys.executable, str(TINY_MLP / "train.py")], env=run_env, cwd=tmp_path, check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(result.read_text())["final_loss"]
