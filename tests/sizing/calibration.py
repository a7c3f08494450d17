"""The published measurements of tests/data/sizing-*.yaml, run through the estimator.

``python -m tests.sizing.calibration`` prints the table of docs/sizing.md ("Calibration").
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from gpuorch.sizing import Workload, estimate_memory
from gpuorch.sizing.memory import CONTEXT_GIB, allowed_gib, nccl_gib

DATA = Path(__file__).resolve().parents[1] / "data"
CALIBRATION = DATA / "sizing-calibration.yaml"
HOLDOUT = DATA / "sizing-holdout.yaml"
CARD_SHARE = 0.985  # the share of a card's marketed GiB PyTorch reports (A100-80GB: 79.15 GiB)


@dataclass(frozen=True)
class Point:
    id: str
    source: str
    published: str
    kind: str  # peak | max_context | startup | oom
    measures: str  # torch | device
    card_gb: float
    gpus: int
    workload: Workload
    measured_gib: float | None
    without_kv: bool
    stack: str | None = None  # the training stack the run used (None: inference)
    stack_workload: Workload | None = None  # the same run described by its stack alone, every knob at default

    @property
    def card_gib(self) -> float:
        return self.card_gb * CARD_SHARE

    def estimate_gib(self) -> float:
        est = estimate_memory(self.workload, self.gpus, self.workload.strategy.strategy if self.gpus > 1 else "none")
        gib = est.per_gpu_gib
        if self.without_kv:
            gib -= est.breakdown["kv_cache"]
        if self.measures == "torch":  # PyTorch's allocator sees neither the CUDA context nor NCCL's buffers
            gib -= self.outside_torch(est.sharding)
        return gib

    def outside_torch(self, mode: str) -> float:
        return CONTEXT_GIB + nccl_gib(self.gpus, mode, self.workload.training)

    def error(self) -> float:
        """(estimate - measured) / measured; None-safe only for measured kinds."""
        assert self.measured_gib is not None
        return self.estimate_gib() / self.measured_gib - 1

    def refused(self) -> bool:
        """Would the estimator refuse this run's card?"""
        est = estimate_memory(self.workload, self.gpus, self.workload.strategy.strategy if self.gpus > 1 else "none")
        return est.per_gpu_gib > allowed_gib(self.card_gib)


# What a user states about a run whatever the stack: the model, method, precision, shape of the
# batch, the adapters' rank and targets and how it spreads. Everything else is a knob the stack sets.
STATED = ("params", "preset", "architecture", "method", "precision", "seq_len", "micro_batch", "lora_rank",
          "lora_targets", "distributed", "max_batched_tokens", "kv_cache_dtype")


def _point(d: dict[str, Any]) -> Point:
    model = dict(d["model"])
    if "distributed" in d:
        model["distributed"] = d["distributed"]
    stack = d.get("stack")
    stated = {k: v for k, v in model.items() if k in STATED} | ({"stack": stack} if stack else {})
    measured = d.get("measured_gib")
    if measured is None and d["kind"] == "max_context":
        measured = d["card_gb"] * CARD_SHARE
    return Point(d["id"], d["source"], d["published"], d["kind"], d["measures"], float(d["card_gb"]),
                 int(d.get("gpus", 1)), Workload.model_validate(model), measured, d.get("compare") == "without_kv",
                 stack, Workload.model_validate(stated))


def by_stack(p: Point) -> Point:
    """The point estimated from its stack alone (``model: {stack: ..., method, model, batch}``)."""
    assert p.stack_workload is not None
    return replace(p, workload=p.stack_workload)


def load(path: Path) -> list[Point]:
    return [_point(d) for d in yaml.safe_load(path.read_text())]


def measured(points: list[Point]) -> list[Point]:
    return [p for p in points if p.kind != "oom"]


def median_abs_error(points: list[Point]) -> float:
    return statistics.median(abs(p.error()) for p in measured(points))


def table(points: list[Point]) -> str:
    rows = ["| point | kind | measured GiB | estimate GiB | error | source |", "|---|---|---:|---:|---:|---|"]
    for p in points:
        if p.kind == "oom":
            verdict = "refused" if p.refused() else "ACCEPTED"
            rows.append(f"| {p.id} | oom on {p.card_gb:g} GB | — | {p.estimate_gib():.1f} | {verdict} | "
                        f"[link]({p.source}) |")
            continue
        rows.append(f"| {p.id} | {p.kind} | {p.measured_gib:.1f} | {p.estimate_gib():.1f} | {p.error():+.0%} | "
                    f"[link]({p.source}) |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - a docs helper
    for path in (CALIBRATION, HOLDOUT):
        pts = load(path)
        sys.stdout.write(f"\n{path.name}: median |error| {median_abs_error(pts):.1%}\n{table(pts)}\n")
