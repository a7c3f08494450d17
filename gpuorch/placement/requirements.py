"""Does an offer class hold the job, and how long does the job run on it?

Checked per class, not per offer (see ``index``), in this order: a GPU at all, the GPU model,
the GPU count, the per-GPU memory floor of ``resources.gpu``, vCPU and RAM, then -- with a
``model:`` block -- precision support, the interconnect the workload demands, and the memory
estimate on the GPUs the job's declared ``distributed`` strategy uses (undeclared: one GPU; a
multi-GPU offer is then only a place to run it). Results are cached per (job needs, index).

A gang (``nodes: N`` > 1) runs on N instances of the class: the strategy spans every node (its
``degree`` counts the GPUs it uses on each instance, as ``GPUORCH_DISTRIBUTED_DEGREE`` does; an
undeclared strategy is torchrun's DDP over every GPU of every node), memory is sized over all
N x GPUs, and the runtime pays the strategy's traffic over the family's fabric between nodes
(``gpuorch.sizing.fabric``). Inference nodes serve replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuorch import gpus
from gpuorch.catalog.families import fabric_for
from gpuorch.jobs.spec import GpuRequirement, JobSpec
from gpuorch.placement.index import OfferClass, OfferIndex
from gpuorch.sizing import GIB, MemoryEstimate, best_estimate, checkpoint_bytes, estimate_hours, unsupported
from gpuorch.sizing.fabric import Fabric
from gpuorch.sizing.workload import Distributed, Workload


@dataclass(frozen=True)
class Needs:
    """The parts of a job spec that decide fit and runtime (hashable: a cache key)."""

    gpu: GpuRequirement | None
    cpus: float
    memory_gib: float
    workload: Workload | None
    allow_larger: bool = False
    nodes: int = 1  # instances of the class the job spans (a gang)

    @classmethod
    def of(cls, spec: JobSpec) -> Needs:
        r = spec.resources
        return cls(r.gpu, r.cpus, r.memory, spec.model, r.allow_larger, spec.nodes)

    def gpus_used(self, offered: int) -> int:
        """GPUs the job uses on an instance with ``offered`` (all of them without resources.gpu)."""
        return self.gpu.uses(offered) if self.gpu is not None else offered


@dataclass(frozen=True)
class ClassFit:
    hours: float | None  # hours of work on this class; None: the job does not say
    per_gpu_gib: float | None
    sharding: str | None
    checkpoint_gib: float  # restored after each preemption
    gpus_used: int = 0  # of the instance's GPUs: fewer than it has when the job allows larger, or when a
    # model job declares no distributed strategy (one GPU); per node for a gang


@dataclass(frozen=True)
class Refusal:
    reason: str
    need_gib: float | None = None  # set when memory was the reason
    usable_gib: float | None = None


def _evaluate(needs: Needs, c: OfferClass) -> ClassFit | Refusal:
    req, w = needs.gpu, needs.workload
    if (req is not None or w is not None) and (c.gpu is None or c.gpu_count < 1):
        return Refusal("no GPU")
    used = needs.gpus_used(c.gpu_count)
    refused = _hardware_refusal(needs, c)
    if refused is not None:
        return refused
    if w is None:
        return ClassFit(None, None, None, 0.0, used)
    return _model_fit(needs, c, w, used)


def _hardware_refusal(needs: Needs, c: OfferClass) -> Refusal | None:
    """The class's GPUs (name, count, memory), vCPUs or RAM short of what the job asks; None: enough."""
    req = needs.gpu
    if req is not None:
        if req.name and not req.matches(c.gpu):
            return Refusal(f"GPU is {c.gpu}, the job asks for {req.name}{'' if req.variant else ' (any variant)'}")
        if c.gpu_count < req.count:
            return Refusal(f"{c.gpu_count} GPU(s), the job asks for {req.count_text}")
        if not req.allows(c.gpu_count, needs.allow_larger):
            return Refusal(larger_refusal(req, c.gpu_count))
        floor = req.memory_floor_gib()
        if not gpus.memory_matches(c.gpu_memory_gib, floor):
            return Refusal(f"{c.gpu_memory_gib:g} GiB per GPU, the job asks for {floor:g} GiB")
    if c.vcpus and c.vcpus < needs.cpus:
        return Refusal(f"{c.vcpus:g} vCPUs, the job asks for {needs.cpus:g}")
    if c.memory_gib and c.memory_gib < needs.memory_gib:
        return Refusal(f"{c.memory_gib:g} GiB RAM, the job asks for {needs.memory_gib:g} GiB")
    return None


def _strategy_gpus(w: Workload, nodes: int, used: int) -> tuple[Workload, int] | Refusal:
    """A model job is sized on the GPUs its distributed strategy uses: one without a strategy (a
    multi-GPU offer is only a place to run it), else the degree or every GPU it may use here
    (``used``). The workload (a gang's training without a strategy: DDP) and those GPUs."""
    if nodes > 1 and w.training and w.strategy.strategy == "none":  # torchrun's DDP over every GPU
        w = w.model_copy(update={"distributed": Distributed(strategy="ddp")})
    strategy = w.strategy
    if strategy.strategy == "none":
        return w, 1
    if strategy.degree:
        if strategy.degree > used:
            return Refusal(f"{used} GPU(s), distributed: {strategy.strategy} asks for {strategy.degree}")
        return w, strategy.degree
    return w, used


def _memory_refusal(w: Workload, est: MemoryEstimate, total: int, used: int, nodes: int, usable: float) -> Refusal:
    over = (f"{est.sharding} over {total}" + (f" on {nodes} nodes" if total > used else "") if total > 1 else
            "on one GPU: the job declares no distributed strategy" if w.strategy.strategy == "none" else
            f"{w.strategy.strategy} on this offer's one GPU")
    return Refusal(f"needs {est.per_gpu_gib:.1f} GiB per GPU ({over}), has {usable:.1f}", est.per_gpu_gib, usable)


def _model_fit(needs: Needs, c: OfferClass, w: Workload, may_use: int) -> ClassFit | Refusal:
    """A model job on ``may_use`` of the class's GPUs: its strategy, interconnect and memory, and its hours."""
    spec = c.spec
    if spec is None:
        return Refusal(f"GPU {c.gpu} is not in the GPU table; its speed is unknown")
    why = unsupported(w, spec)
    if why:
        return Refusal(why)
    nodes = needs.nodes
    sized = _strategy_gpus(w, nodes, may_use)
    if isinstance(sized, Refusal):
        return sized
    w, used = sized
    link = c.interconnect if used > 1 else None
    if w.interconnect == "nvlink" and used > 1 and link not in gpus.FAST_LINKS:
        return Refusal(f"GPUs linked by {link or 'an unknown interconnect'}; the job asks for interconnect: nvlink")
    usable = min(c.gpu_memory_gib, spec.usable)
    # Training state shards over every GPU of the gang; inference nodes are replicas of one node.
    total = used * nodes if w.training else used
    est, ok = best_estimate(w, total, usable)
    if not ok:
        return _memory_refusal(w, est, total, used, nodes, usable)
    # Tensor-parallel inference serves one replica per `degree` GPUs of the offer (tensor x data
    # parallel); everything else runs on the GPUs it uses and leaves the rest idle.
    busy = may_use if est.sharding == "tp" else used
    hours = estimate_hours(w, spec, busy * nodes, link, est.sharding, nodes, class_fabric(c) if nodes > 1 else None)
    return ClassFit(hours, est.per_gpu_gib, est.sharding, checkpoint_bytes(w) / GIB, busy)


def class_fabric(c: OfferClass) -> Fabric | None:
    """The network between instances of the class's family (None: unknown, e.g. local or sim)."""
    found = fabric_for(c.provider, c.instance_type)
    return Fabric(*found) if found is not None else None


def larger_refusal(req: GpuRequirement, offered: int) -> str:
    """Why an instance with more GPUs than asked is refused, and the two ways to allow it."""
    if not req.at_least:
        name = req.name or "GPU"
        return (f"{offered} GPUs, the job asks for exactly {req.count}; to accept larger instances set "
                f"resources.allow_larger: true or write a range like {name}:{req.count}..{offered}")
    return f"{offered} GPUs, the job asks for {req.count_text}; set resources.allow_larger: true to accept more"


CACHE_JOBS = 4096


def evaluate_classes(needs: Needs, idx: OfferIndex) -> list[ClassFit | Refusal]:
    """``_evaluate`` for every class of ``idx``, memoised on the index: a queue of similar
    jobs over one catalog computes each fit once."""
    cache = idx.fits
    found = cache.get(needs)
    if found is None:
        found = cache[needs] = [_evaluate(needs, c) for c in idx.classes]
        if len(cache) > CACHE_JOBS:
            del cache[next(iter(cache))]  # oldest first
    return found
