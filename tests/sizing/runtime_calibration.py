"""The published throughputs of tests/data/runtime-calibration.yaml, run through the estimator.

``python -m tests.sizing.runtime_calibration`` prints the table of docs/sizing.md ("Runtime").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuorch import gpus as gpu_table
from gpuorch.gpus import GpuSpec
from gpuorch.sizing import Workload
from gpuorch.sizing.fabric import Fabric
from gpuorch.sizing.runtime import training_tokens_per_s

DATA = Path(__file__).resolve().parents[1] / "data" / "runtime-calibration.yaml"


@dataclass(frozen=True)
class Run:
    id: str
    source: str
    published: str
    gpu: GpuSpec
    gpus: int
    nodes: int
    fabric: Fabric | None
    tps_per_gpu: float
    workload: Workload

    def estimate(self) -> float:
        per_node = self.gpus // self.nodes
        rate = training_tokens_per_s(self.workload, self.gpu, self.gpus, self.gpu.link if per_node > 1 else None,
                                     self.workload.strategy.strategy, self.nodes, self.fabric)
        return rate / self.gpus

    def error(self) -> float:
        return self.estimate() / self.tps_per_gpu - 1


def _run(d: dict[str, Any]) -> Run:
    spec = gpu_table.lookup(d["gpu"])
    assert spec is not None, d["gpu"]
    return Run(d["id"], d["source"], d["published"], spec, int(d["gpus"]), int(d.get("nodes", 1)), fabric(d),
               float(d["tps_per_gpu"]), Workload.model_validate(d["model"]))


def fabric(d: dict[str, Any]) -> Fabric | None:
    f = d.get("fabric")
    return Fabric(str(f["kind"]), float(f["gbps"])) if f else None


def load(path: Path = DATA) -> list[Run]:
    return [_run(d) for d in yaml.safe_load(path.read_text())]


def table(runs: list[Run]) -> str:
    rows = ["| run | GPUs | measured tok/s/GPU | estimate | error | source |", "|---|---|---:|---:|---:|---|"]
    rows += [f"| {r.id} | {r.gpus}x{r.gpu.name} | {r.tps_per_gpu:,.0f} | {r.estimate():,.0f} | {r.error():+.0%} | "
             f"[link]({r.source}) |" for r in runs]
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - a docs helper
    sys.stdout.write(table(load()) + "\n")
