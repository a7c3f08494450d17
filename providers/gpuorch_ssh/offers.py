"""A pool host's offers: one per GPU model and slot count it can take now (1 to its free slots),
so a job asking for 2 x A100 finds a 2-GPU offer without ``allow_larger``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gpuorch.provider import Offer

from .config import PROVIDER, GpuGroup, Host


def instance_type(gpu: str, count: int, host: str) -> str:
    """``A100-80GBx2@gpu-box-1``: the host is part of the offer class, so the daemon's back-off of
    a class after a launch found the host full (it keys on provider, region and instance type)
    holds that host only, not the pool's other hosts with the same GPUs."""
    return f"{gpu}x{count}@{host}"


def host_offers(host: Host, region: str, groups: Iterable[GpuGroup], free: Mapping[str, Sequence[int]],
                cpus: int, memory_gib: float) -> list[Offer]:
    """``host``'s offers from its GPU ``groups`` and the ``free`` slots of each model. CPUs and
    memory (0: unknown) are shared out by GPU count; billed per second with no minimum, at
    ``host.price_per_gpu_hour`` per GPU."""
    groups = list(groups)
    total = sum(len(g.indexes) for g in groups) or 1
    out = []
    for g in groups:
        for n in range(1, len(free.get(g.gpu, ())) + 1):
            out.append(Offer(
                provider=PROVIDER, region=region, zone=host.zone, instance_type=instance_type(g.gpu, n, host.zone),
                gpu=g.gpu,
                gpu_count=n, gpu_memory_gib=g.memory_gib, vcpus=cpus * n // total,
                memory_gib=round(memory_gib * n / total, 1), price_per_hour=round(host.price_per_gpu_hour * n, 6),
                spot_price_per_hour=None, billing_granularity_s=1, min_billing_s=0))
    return out
