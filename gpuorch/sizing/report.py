"""The estimate as data (``gpuorch estimate --json``) and the one-line errors of impossible fits."""

from __future__ import annotations

from typing import Any

from gpuorch import gpus
from gpuorch.errors import UserInputError
from gpuorch.sizing.fabric import Fabric
from gpuorch.sizing.fit import MAX_NODES, Fit, best_estimate, smallest_fit, smallest_fits, unsupported
from gpuorch.sizing.memory import HEADROOM, MemoryEstimate, allowed_gib, estimate_memory
from gpuorch.sizing.runtime import calibrated, estimate_hours
from gpuorch.sizing.workload import Workload


def advice(w: Workload, more_gpus: bool = True) -> str:
    """What usually makes a job fit, most effective first (``more_gpus``: also suggest more GPUs)."""
    tips = []
    if w.method == "full":
        tips.append("method qlora or lora")
    if w.method == "inference" and w.precision in ("bf16", "fp16"):
        tips.append("precision int8 or int4")
    if w.training and w.ac_mode != "full":
        tips.append("gradient checkpointing (activation_checkpointing: full)")
    if w.training and w.loss_mode == "eager" and w.shape.vocab >= 64_000:
        tips.append("loss: chunked or fused")
    if w.seq_len * w.micro_batch > 2048:
        tips.append("a shorter seq_len or micro_batch")
    declared_one = w.distributed is not None and w.strategy.strategy == "none"
    if declared_one:  # a job sized for one GPU: several only if it says how to use them
        tips.append(strategy_hint(w) or "a distributed strategy (fsdp, zero3; tp for inference) over several GPUs")
    elif more_gpus or not tips:
        tips.append("more GPUs")
    return "try " + ", ".join(tips[:-1]) + (" or " if len(tips) > 1 else "") + tips[-1]


def strategy_hint(w: Workload) -> str | None:
    """For a job that declares no strategy: the smallest one-node multi-GPU configuration that
    would hold it if it declared one, as the line to add."""
    explored = smallest_fits(w.model_copy(update={"distributed": None}))
    multi = [f for f in explored if f.nodes == 1 and f.gpu_count > 1]
    if not multi:
        return None
    f = multi[0]
    return f"distributed: {{strategy: {f.sharding}}} ({f.gpu_count}x{f.gpu} holds it that way)"


def _missing(need: float, usable: float) -> str:
    """What is missing on a card with ``usable`` GiB, whose last HEADROOM is kept free."""
    return (f"needs {need:.1f} GiB per GPU, has {usable:.1f} GiB ({need - allowed_gib(usable):.1f} GiB missing; "
            f"a fit keeps {HEADROOM:.0%} of the card free)")


def check_fit(w: Workload, gpu_name: str, gpu_count: int = 1) -> MemoryEstimate:
    """The estimate on ``gpu_count`` x ``gpu_name``; UserInputError when it cannot run there."""
    spec = gpus.lookup(gpu_name)
    if spec is None:
        raise UserInputError(f"unknown GPU {gpu_name!r}; known: {', '.join(gpus.known_names())}")
    why = unsupported(w, spec)
    if why:
        raise UserInputError(why)
    est, ok = best_estimate(w, gpu_count, spec.usable)
    if not ok:
        fit = smallest_fit(w, spec)
        hint = f"{fit.gpu_count}x{spec.name} fits ({fit.sharding})" if fit else advice(w)
        raise UserInputError(f"{gpu_count}x{spec.name} is too small: {_missing(est.per_gpu_gib, spec.usable)}; {hint}")
    return est


def no_fit_error(w: Workload) -> UserInputError:
    """Nothing in the GPU table holds ``w``: name the largest configuration and the gap."""
    largest = max(gpus.GPUS, key=lambda g: g.usable)
    count = largest.max_per_node * MAX_NODES
    est, _ = best_estimate(w, count, largest.usable)
    return UserInputError(
        f"no configuration fits: the largest, {MAX_NODES} nodes of {largest.max_per_node}x{largest.name}, "
        f"{_missing(est.per_gpu_gib, largest.usable)}; {advice(w)}"
    )


def stack_assumptions(w: Workload) -> dict[str, Any]:
    """The settings the workload's stack chose (the knobs the ``model:`` block left unset), by name."""
    if not w.training:
        return {}
    k = w.knobs
    skip = {"adapter_dtype"} if w.method == "full" else {"master_weights", "optimizer_in_backward"}
    if w.knobs.optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        skip.add("optimizer_state_dtype")
    return {name: (list(v) if isinstance(v, tuple) else v) for name in k.from_stack if name not in skip
            for v in [getattr(k, name)]}


def stack_line(w: Workload) -> str | None:
    """One line: which assumptions came from the stack (None: the block set every knob, or inference)."""
    chosen = stack_assumptions(w)
    if not chosen:
        return None
    text = ", ".join(f"{k} {'+'.join(v) or 'none' if isinstance(v, list) else str(v).lower()}"
                     for k, v in chosen.items())
    return f"from stack {w.stack} (set a knob to override): {text}"


def workload_summary(w: Workload) -> dict[str, Any]:
    adapters = w.method in ("lora", "qlora")
    return {
        "params": w.n_params,
        "stack": w.stack,
        "from_stack": stack_assumptions(w),
        "shape": w.shape.name,
        "method": w.method,
        "precision": w.precision,
        "optimizer": w.knobs.optimizer if w.training else None,
        "optimizer_state_dtype": w.knobs.optimizer_state_dtype if w.training else None,
        "master_weights": w.uses_master if w.method == "full" else None,
        "seq_len": w.seq_len,
        "micro_batch": w.micro_batch,
        "gradient_checkpointing": w.checkpointing,
        "activation_checkpointing": w.ac_mode if w.training else None,
        "loss": w.loss_mode if w.training else None,
        "offload": list(w.knobs.offload),
        "compile": w.knobs.compile,
        "kv_cache_bytes": w.kv_bytes if not w.training else None,
        "max_batched_tokens": w.max_batched_tokens if not w.training else None,
        "lora_rank": w.lora_rank if adapters else None,
        "lora_targets": list(w.lora_targets) if adapters else None,
        "adapter_dtype": w.knobs.adapter_dtype if adapters else None,
        "trainable_params": w.trainable_params,
        "sharding": w.sharding,
        "distributed": w.strategy.model_dump(),
    }


def _fit_dict(w: Workload, f: Fit, fabric: Fabric | None = None) -> dict[str, Any]:
    d = f.as_dict()
    spec = gpus.lookup(f.gpu)
    if spec is not None and (w.tokens is not None or w.duration is not None):
        link = f.link if f.gpus_per_node > 1 else None
        d["est_hours"] = estimate_hours(w, spec, f.gpu_count, link, f.sharding, f.nodes, fabric)
        d["speed_calibrated"] = w.duration is not None or calibrated(w, spec)
    return d


def estimate_report(w: Workload, gpu_count: int = 1, gpu_name: str | None = None,
                    fabric: Fabric | None = None) -> dict[str, Any]:  # fmt: skip
    """The per-GPU breakdown on ``gpu_count`` GPUs (checked against ``gpu_name`` when given) and
    the smallest configuration of every GPU model that fits; multi-node hours over ``fabric``
    (None: unknown, 100 Gb/s Ethernet). Raises UserInputError."""
    est = check_fit(w, gpu_name, gpu_count) if gpu_name else estimate_memory(w, gpu_count)
    gpu = gpus.lookup(gpu_name) if gpu_name else None
    fits = smallest_fits(w)
    if not fits:
        raise no_fit_error(w)
    smallest: dict[str, Any] = {}
    for f in fits:
        smallest.setdefault(f.scope.replace("-", "_"), _fit_dict(w, f, fabric))
    return {
        "workload": workload_summary(w),
        "gpu": gpu.name if gpu else None,
        "gpus": gpu_count,
        "sharding": est.sharding,
        "per_gpu_gib": round(est.per_gpu_gib, 2),
        "total_gib": round(est.total_gib, 2),
        "breakdown": {k: round(v, 2) for k, v in est.breakdown.items()},
        "headroom": HEADROOM,
        "fits": [_fit_dict(w, f, fabric) for f in fits],
        "fabric": {"kind": fabric.kind, "gbps": fabric.gbps} if fabric else None,
        "smallest": {k: smallest.get(k) for k in ("single", "node", "multi_node")},
    }
