"""Model-aware sizing: how much GPU memory a workload needs and how long it runs.

Pure functions over ``Workload`` (the ``model:`` block of a job spec) and the GPU table in
``gpuorch.gpus``; formulas and sources are in docs/sizing.md.
"""

from gpuorch.sizing.fit import Fit, best_estimate, smallest_fit, smallest_fits, unsupported
from gpuorch.sizing.memory import (
    GIB,
    MemoryEstimate,
    allowed_gib,
    checkpoint_bytes,
    estimate_memory,
    fits,
    sharding_options,
    weight_bytes,
)
from gpuorch.sizing.runtime import decode_tokens_per_s, estimate_hours, scaling, training_flops
from gpuorch.sizing.shapes import PRESETS, ModelShape, parse_count, shape_for
from gpuorch.sizing.workload import Architecture, Distributed, Workload

__all__ = [
    "GIB",
    "PRESETS",
    "Architecture",
    "Distributed",
    "Fit",
    "MemoryEstimate",
    "ModelShape",
    "Workload",
    "allowed_gib",
    "best_estimate",
    "checkpoint_bytes",
    "decode_tokens_per_s",
    "estimate_hours",
    "estimate_memory",
    "fits",
    "parse_count",
    "shape_for",
    "scaling",
    "sharding_options",
    "smallest_fit",
    "smallest_fits",
    "training_flops",
    "unsupported",
    "weight_bytes",
]
