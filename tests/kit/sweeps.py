"""Shared by the sweep tests (tests/sweeps, tests/money): a sweep of a learning-rate grid, submitted
through the real sweep intent, its trials and its report."""

from __future__ import annotations

import math

import yaml

from gpuorch.store.models import Job, Sweep
from gpuorch.sweeps import intent
from gpuorch.sweeps.report import sweep_report
from gpuorch.sweeps.spec import load_sweep

JOB = {"run": "python train.py --lr {LR}", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
       "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}


def loss(progress: float, env: dict[str, str]) -> dict:
    """Best at LR 0.003; falls with the step (one step a second of work)."""
    lr = float(env["LR"])
    return {"step": int(progress), "loss": round(abs(math.log10(lr / 0.003)) + 100 / (100 + progress), 6)}


def submit(store, clock, tmp_path, **fields):
    doc = {"name": "lr", "job": JOB, "parameters": {"LR": [0.003, 0.001, 0.0003, 0.1]}, "max_parallel": 2,
           "objective": {"metric": "loss", "mode": "min"}, **fields}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return intent.submit(store, *load_sweep(path, clock.now()), clock.now())


def trials(store, sweep_id) -> list[Job]:
    with store.read() as s:
        return intent.trials_of(s, sweep_id)


def report(store, sweep_id, clock) -> dict:
    with store.read() as s:
        return sweep_report(s, s.get(Sweep, sweep_id), clock.now())
