"""The published multi-node scaling pairs of tests/data/multinode-scaling.yaml, run through the
node factor. ``python -m tests.sizing.multinode_scaling`` prints the table of docs/sizing.md
("Runtime", "Across nodes")."""

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
from tests.sizing.runtime_calibration import fabric

DATA = Path(__file__).resolve().parents[1] / "data" / "multinode-scaling.yaml"


@dataclass(frozen=True)
class Pair:
    id: str
    role: str
    source: str
    gpu: GpuSpec
    fabric: Fabric | None
    few: dict[str, Any]
    many: dict[str, Any]
    workload: Workload

    def _rate(self, side: dict[str, Any]) -> float:
        gpus, nodes = int(side["gpus"]), int(side["nodes"])
        link = self.gpu.link if gpus // nodes > 1 else None
        return training_tokens_per_s(self.workload, self.gpu, gpus, link, self.workload.strategy.strategy, nodes,
                                     self.fabric) / gpus

    @property
    def measured(self) -> float:
        return float(self.many["tps_per_gpu"]) / float(self.few["tps_per_gpu"])

    def predicted(self) -> float:
        return self._rate(self.many) / self._rate(self.few)


def load(path: Path = DATA) -> list[Pair]:
    out = []
    for d in yaml.safe_load(path.read_text()):
        spec = gpu_table.lookup(d["gpu"])
        assert spec is not None, d["gpu"]
        out.append(Pair(d["id"], d["role"], d["source"], spec, fabric(d), d["few"], d["many"],
                        Workload.model_validate(d["model"])))
    return out


def table(pairs: list[Pair]) -> str:
    rows = ["| pair | role | fabric | GPUs | measured ratio | predicted | error | source |",
            "|---|---|---|---|---:|---:|---:|---|"]
    for p in pairs:
        f = f"{p.fabric.kind} {p.fabric.gbps:g} Gb/s" if p.fabric else "-"
        rows.append(f"| {p.id} | {p.role} | {f} | {p.few['gpus']} → {p.many['gpus']} {p.gpu.name} | "
                    f"{p.measured:.3f} | {p.predicted():.3f} | {p.predicted() - p.measured:+.3f} | "
                    f"[link]({p.source}) |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - a docs helper
    sys.stdout.write(table(load()) + "\n")
