"""The published throughputs of tests/data/runtime-calibration.yaml, run through the estimator.

``python -m tests.sizing.runtime_calibration`` prints the table of docs/sizing.md ("Runtime").
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from gpuorch import gpus as gpu_table
from gpuorch.gpus import GpuSpec
from gpuorch.sizing import Workload
from gpuorch.sizing.fabric import Fabric
from gpuorch.sizing.runtime import capped_tflops, training_tokens_per_s

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
    role: str = "calibration"  # or holdout: chose no constant
    date: str = ""  # when the figure was measured or published, where the source says

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
    if "power_w" in d:  # a power-capped part: its peaks at the cap
        peak = capped_tflops(spec, float(d["power_w"]))
        spec = replace(spec, bf16_tflops=peak, fp16_tflops=peak, fp8_tflops=spec.fp8_tflops * peak / spec.bf16_tflops)
    return Run(d["id"], d["source"], d["published"], spec, int(d["gpus"]), int(d.get("nodes", 1)), fabric(d),
               float(d["tps_per_gpu"]), Workload.model_validate(d["model"]), d.get("role", "calibration"),
               str(d.get("date", "")))


def fabric(d: dict[str, Any]) -> Fabric | None:
    f = d.get("fabric")
    return Fabric(str(f["kind"]), float(f["gbps"])) if f else None


def load(path: Path = DATA) -> list[Run]:
    return [_run(d) for d in yaml.safe_load(path.read_text())]


def median_abs_error(runs: list[Run]) -> float:
    return statistics.median(abs(r.error()) for r in runs)


def gddr(runs: list[Run]) -> list[Run]:
    """The runs on GDDR (PCIe) cards: the class issue 36 calibrates apart from the HBM parts."""
    return [r for r in runs if r.gpu.memory_type.startswith("GDDR")]


def summary(runs: list[Run], prefix: str = "runtime") -> dict[str, float]:
    """Median |error| and the worst error (percent) of the fitted runs and of the held-out ones."""
    out: dict[str, float] = {}
    for role, key in (("calibration", "fit"), ("holdout", "holdout")):
        errs = [r.error() for r in runs if r.role == role]
        out[f"{prefix}_{key}_runs"] = len(errs)
        out[f"{prefix}_{key}_median_abs_err_pct"] = round(100 * statistics.median(abs(e) for e in errs), 1)
        out[f"{prefix}_{key}_worst_err_pct"] = round(100 * max(errs, key=abs), 1)
    return out


def table(runs: list[Run]) -> str:
    rows = ["| run | set | GPUs | measured tok/s/GPU | estimate | error | source |", "|---|---|---|---:|---:|---:|---|"]
    rows += [f"| {r.id} | {r.role} | {r.gpus}x{r.gpu.name} | {r.tps_per_gpu:,.0f} | {r.estimate():,.0f} | "
             f"{r.error():+.0%} | [link]({r.source}) |" for r in runs]
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - a docs helper
    sys.stdout.write(table(load()) + "\n")
