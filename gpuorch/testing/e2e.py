"""Helpers of the end-to-end tests: drive a reconciler until a condition holds (in wall time, or
on a fake clock), read a job, its status, attempts and events from the store, and compute the
tiny_mlp example's result without gpuorch (the reference a resumed run must match bitwise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Event, Job, JobStatus
from gpuorch.testing.contract import wait_until

TINY_MLP = Path(__file__).resolve().parents[2] / "configs" / "examples" / "tiny_mlp"


def passes_until(step: Callable[[], object], check: Callable[[], Any], *, timeout_s: float = 120.0,
                 what: str = "the daemon's progress") -> Any:
    """Run ``step`` (a reconcile pass) every 0.2 s until ``check`` holds; return what it returned."""
    def once() -> Any:
        step()
        return check()
    return wait_until(once, timeout_s=timeout_s, step_s=0.2, what=what)


def clock_passes(rec: Any, clock: Any, passes: int, step_s: float) -> None:
    """``passes`` reconcile passes of ``rec``, the fake ``clock`` advanced ``step_s`` after each."""
    for _ in range(passes):
        rec.run_pass()
        clock.advance(step_s)


def job_row(store: Store, job_id: int) -> Job:
    """The job's row as the store holds it now (detached: read its fields, not its relations)."""
    with store.read() as s:
        return s.get(Job, job_id)  # type: ignore[return-value]


def job_status(store: Store, job_id: int) -> JobStatus:
    with store.read() as s:
        return s.get(Job, job_id).status  # type: ignore[union-attr]


def attempts(store: Store, job_id: int) -> list[Attempt]:
    with store.read() as s:
        return jobs.attempts_of(s, job_id)


def events(store: Store, kind: str, job_id: int | None = None) -> list[Event]:
    """The events of ``kind`` (of one job, or of all), oldest first."""
    query = select(Event).where(Event.kind == kind)
    if job_id is not None:
        query = query.where(Event.job_id == job_id)
    with store.read() as s:
        return list(s.exec(query.order_by(Event.id)))  # type: ignore[arg-type]


def tiny_mlp_reference(tmp_path: Path, env: Mapping[str, str], tag: str = "ref") -> float:
    """The final loss of an uninterrupted run of tiny_mlp with ``env``, run directly."""
    result = tmp_path / f"{tag}.json"
    run_env = {**os.environ, **env, "STEP_SLEEP": "0", "GPUORCH_CHECKPOINT_DIR": str(tmp_path / f"{tag}-ckpt"),
               "GPUORCH_RESULT_FILE": str(result)}
    subprocess.run([sys.executable, str(TINY_MLP / "train.py")], env=run_env, cwd=tmp_path, check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(result.read_text())["final_loss"]
