"""GPUs as ``nvidia-smi`` names them (``NVIDIA A100-SXM4-80GB``, ``Tesla T4``), mapped to
``gpuorch.gpus`` and grouped by model with their indexes (a host's slot numbers)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuorch.provider import gpus

from .config import GpuGroup


def canonical_gpu(reported: str, memory_gib: float) -> str | None:
    """The full name (``H100-PCIe``), then the model with its memory (``A100`` + 80 GB ->
    ``A100-80GB``), then the model; None for a card gpuorch does not know."""
    words = reported.replace("NVIDIA", " ").replace("Tesla", " ").split()
    if not words:
        return None
    base = words[0].split("-")[0]
    for name in ("-".join(words), f"{base}-{round(memory_gib)}GB", base):
        spec = gpus.lookup(name)
        if spec is not None:
            return spec.name
    return None


def canonical_groups(reported: Iterable[Sequence[object]]) -> tuple[GpuGroup, ...]:
    """``[[name, MiB], ...]`` in index order -> one group per known model (unknown cards left out)."""
    found: dict[str, tuple[float, list[int]]] = {}
    for index, row in enumerate(reported):
        try:
            name, mib = str(row[0]), float(str(row[1]))
        except (IndexError, ValueError, TypeError):
            continue
        gpu = canonical_gpu(name, mib / 1024)
        if gpu is not None:
            found.setdefault(gpu, (round(mib / 1024, 1), []))[1].append(index)
    return tuple(GpuGroup(gpu, memory, tuple(indexes)) for gpu, (memory, indexes) in sorted(found.items()))
