"""Model-aware sizing: how much GPU memory a workload needs and how long it runs.

Pure functions over ``Workload`` (the ``model:`` block of a job spec) and the GPU table in
``gpuorch.gpus``; formulas and sources are in docs/sizing.md.
"""

from gpuorch.sizing.fit import Fit, best_estimate, smallest_fit, smallest_fits, unsupported
from gpuorch.sizing.memory import (
    GIB,
    MemoryEstimate,
    checkpoint_bytes,
    estimate_memory,
    sharding_options,
    weight_bytes,
)
from gpuorch.sizing.runtime import decode_tokens_per_s, estimate_hours, training_flops
from gpuorch.sizing.shapes import PRESETS, ModelShape, parse_count, shape_for
from gpuorch.sizing.workload import Architecture, Workload

__all__ = [
    "GIB",
    "PRESETS",
    "Architecture",
    "Fit",
    "MemoryEstimate",
    "ModelShape",
    "Workload",
    "best_estimate",
    "checkpoint_bytes",
    "decode_tokens_per_s",
    "estimate_hours",
    "estimate_memory",
    "parse_count",
    "shape_for",
    "sharding_options",
    "smallest_fit",
    "smallest_fits",
    "training_flops",
    "unsupported",
    "weight_bytes",
]
