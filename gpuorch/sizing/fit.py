"""Which GPU configurations hold a workload: one GPU, N GPUs in one node, or several nodes.

A configuration fits when the per-GPU estimate, with the least sharding that works, leaves the
headroom of the GPU's usable memory free (``memory.fits``) and the GPU computes in the workload's
precision (BF16 needs Ampere or newer; FP8 needs Hopper, Ada, Blackwell or MI300X). A workload
that declares a ``distributed`` strategy is only tried with it; one that does not is explored
with every strategy here (``gpuorch estimate`` is a what-if tool), but placed on one GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuorch import gpus as gpu_table
from gpuorch.gpus import GpuSpec
from gpuorch.sizing.memory import MemoryEstimate, estimate_memory, fits, sharding_options
from gpuorch.sizing.workload import Workload

MAX_NODES = 16


@dataclass(frozen=True)
class Fit:
    gpu: str
    gpus_per_node: int
    nodes: int
    sharding: str
    per_gpu_gib: float
    usable_gib: float
    link: str  # inside the node

    @property
    def gpu_count(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def scope(self) -> str:
        if self.nodes > 1:
            return "multi-node"
        return "single" if self.gpus_per_node == 1 else "node"

    def as_dict(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "nodes": self.nodes,
            "scope": self.scope,
            "sharding": self.sharding,
            "per_gpu_gib": round(self.per_gpu_gib, 2),
            "usable_gib": self.usable_gib,
            "link": self.link,
        }


def best_estimate(w: Workload, gpus: int, usable_gib: float) -> tuple[MemoryEstimate, bool]:
    """The least-sharded estimate that fits a card of ``usable_gib`` (headroom kept); else the
    smallest one and False."""
    est = None
    for mode in sharding_options(w, gpus):
        est = estimate_memory(w, gpus, mode, usable_gib)
        if fits(est, usable_gib):
            return est, True
    assert est is not None
    return est, False


def unsupported(w: Workload, gpu: GpuSpec) -> str | None:
    """Why ``gpu`` cannot run ``w``'s precision, or None."""
    p = w.compute_precision
    if gpu.supports(p):
        return None
    fix = "use precision fp16" if p == "bf16" else "use precision bf16 or a Hopper/Ada/Blackwell GPU"
    return f"{gpu.name} has no {p} tensor cores; {fix}"


def _node_sizes(gpu: GpuSpec) -> list[int]:
    sizes, n = [1], 2
    while n <= gpu.max_per_node:
        sizes.append(n)
        n *= 2
    return sizes


def smallest_fit(w: Workload, gpu: GpuSpec, max_nodes: int = MAX_NODES) -> Fit | None:
    """The fewest GPUs of this model that hold ``w``: one, then a node, then several nodes."""
    if unsupported(w, gpu):
        return None
    layouts = [(n, 1) for n in _node_sizes(gpu)] + [(gpu.max_per_node, k) for k in range(2, max_nodes + 1)]
    degree = w.strategy.degree
    if degree:  # a declared degree is the only layout
        layouts = [(degree, 1)] if degree <= gpu.max_per_node else (
            [(gpu.max_per_node, degree // gpu.max_per_node)] if degree % gpu.max_per_node == 0 else [])
    for per_node, nodes in layouts:
        est, ok = best_estimate(w, per_node * nodes, gpu.usable)
        if ok:
            return Fit(gpu.name, per_node, nodes, est.sharding, est.per_gpu_gib, gpu.usable, gpu.link)
    return None


def smallest_fits(w: Workload, table: Iterable[GpuSpec] = gpu_table.GPUS) -> list[Fit]:
    """The smallest fitting configuration of every GPU model, fewest GPUs first."""
    found = [f for g in table if (f := smallest_fit(w, g)) is not None]
    return sorted(found, key=lambda f: (f.gpu_count, f.usable_gib, f.gpu))
