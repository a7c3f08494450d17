"""Instance families that carry GPUs, and how their GPUs talk inside one node and between nodes.

Each adapter declares its own families (``AdapterCatalog.families`` in ``gpuorch_<cloud>/catalog.py``,
sources in docs/sizing.md, "Instance families"); these look them up by provider name through the
registry, for code that holds only an offer's provider and instance type.
"""

from __future__ import annotations

from gpuorch.catalog.adapter import Family

__all__ = ["Family", "fabric_for", "family_of", "interconnect_for"]


def family_of(provider: str, instance_type: str) -> Family | None:
    from gpuorch.catalog.registry import catalog_of

    found = catalog_of(provider)
    return found.family_of(instance_type) if found is not None else None


def interconnect_for(provider: str, instance_type: str, gpu_count: int) -> str | None:
    """The GPU-to-GPU link of a multi-GPU instance; None for one GPU or an unknown family."""
    from gpuorch.catalog.registry import catalog_of

    found = catalog_of(provider)
    return found.interconnect_for(instance_type, gpu_count) if found is not None else None


def fabric_for(provider: str, instance_type: str) -> tuple[str, float] | None:
    """(fabric kind, Gb/s per node) between instances of this type; None for an unknown family
    (local, sim, a CSV's own instance types)."""
    from gpuorch.catalog.registry import catalog_of

    found = catalog_of(provider)
    return found.fabric_for(instance_type) if found is not None else None
