"""Offers from the nodes: their allocatable GPUs and GPU feature discovery labels, less what pods hold.

NVIDIA's GPU feature discovery labels a node ``nvidia.com/gpu.product`` (``NVIDIA-A100-SXM4-80GB``)
and ``nvidia.com/gpu.memory`` (MiB per GPU); AMD's device plugin labeller ``amd.com/gpu.product``
and ``amd.com/gpu.memory`` likewise. One offer per (region, GPU model, GPUs per pod): GPUs per pod
in powers of two up to what one schedulable, Ready node has. An offer's instance type is
``<GPU>x<count>`` (``A100-80GBx2``); its price is the context's price per GPU-hour times count.

Offers are the cluster's capacity, as a cloud's catalog is, not what is free now: a full cluster
still lists its node classes, so owned capacity first (``gpuorch.placement.owned``) has an owned
option to wait for. Which GPUs are free is decided at launch (``NoCapacityError`` when none
are), and the daemon then backs that class off: what "full" means to placement, as for an SSH
pool whose slots are taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuorch import gpus
from gpuorch.provider import Offer

TERMINAL = ("Succeeded", "Failed")
_VENDOR_PREFIX = re.compile(r"^(NVIDIA|Tesla|AMD|Instinct|GeForce|Radeon)[-_ ]+", re.IGNORECASE)


def canonical_gpu(product: str, memory_mib: str | None) -> str | None:
    """gpuorch's name (``gpuorch.gpus``) for a product label, using the memory label to pick the
    variant (``NVIDIA-H100-80GB-HBM3`` + 81559 -> ``H100``); None for a product gpuorch does not know."""
    memory = None
    try:
        memory = float(memory_mib) / 1024 if memory_mib else None
    except ValueError:
        memory = None
    name = product
    while (stripped := _VENDOR_PREFIX.sub("", name)) != name:
        name = stripped
    spec = gpus.lookup(name)
    if spec is not None:
        return spec.name
    for token in re.split(r"[-_ ]+", name):  # the model among the words: A100, H100, MI300X, L40S...
        if gpus.is_family_name(token):
            found = gpus.variant_for(token, memory)
            if found is not None:
                return found.name
    return None


def quantity(text: str | int | None) -> float:
    """A Kubernetes quantity (``32``, ``500m``, ``256Gi``, ``1.5e3``) as a plain number."""
    if text is None:
        return 0.0
    s = str(text).strip()
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}
    for suffix, factor in units.items():
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * factor
    return float(s)


def requested(pod: dict[str, Any], resource: str) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        total += int(quantity((res.get("limits") or res.get("requests") or {}).get(resource)))
    return total


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


@dataclass(frozen=True)
class NodeGpus:
    name: str
    gpu: str  # canonical
    product: str  # the label's value
    total: int
    free: int
    vcpus_per_gpu: float
    memory_gib_per_gpu: float
    memory_gib: float  # per GPU


def node_gpus(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], resource: str) -> list[NodeGpus]:
    """Each schedulable, Ready node with GPUs of ``resource`` gpuorch knows, and how many are free."""
    vendor = resource.split("/")[0]
    held: dict[str, int] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and (p.get("status") or {}).get("phase") not in TERMINAL:
            held[node] = held.get(node, 0) + requested(p, resource)
    out = []
    for n in nodes:
        meta, status = n.get("metadata") or {}, n.get("status") or {}
        labels = meta.get("labels") or {}
        total = int(quantity((status.get("allocatable") or {}).get(resource)))
        if total < 1 or (n.get("spec") or {}).get("unschedulable") or not node_ready(n):
            continue
        product = labels.get(f"{vendor}/gpu.product", "")
        gpu = canonical_gpu(product, labels.get(f"{vendor}/gpu.memory"))
        if gpu is None:
            continue
        spec = gpus.lookup(gpu)
        mib = labels.get(f"{vendor}/gpu.memory")
        memory = float(mib) / 1024 if mib and mib.isdigit() else (spec.usable if spec else 0.0)
        alloc = status.get("allocatable") or {}
        name = meta.get("name", "")
        out.append(NodeGpus(name, gpu, product, total, max(0, total - held.get(name, 0)),
                            quantity(alloc.get("cpu")) / total, quantity(alloc.get("memory")) / 2**30 / total, memory))
    return out


def instance_type(gpu: str, count: int) -> str:
    return f"{gpu}x{count}"


def parse_instance_type(text: str) -> tuple[str, int] | None:
    gpu, sep, count = text.rpartition("x")
    return (gpu, int(count)) if sep and gpu and count.isdigit() and int(count) > 0 else None


def build_offers(provider: str, region: str, price_per_gpu_hour: float, found: list[NodeGpus]) -> list[Offer]:
    best: dict[tuple[str, int], NodeGpus] = {}
    for n in found:
        count = 1
        while count <= n.total:  # capacity: a launch finds out what is free (module docstring)
            key = (n.gpu, count)
            if key not in best:
                best[key] = n
            count *= 2
    return [Offer(provider=provider, region=region, zone=region, instance_type=instance_type(gpu, count), gpu=gpu,
                  gpu_count=count, gpu_memory_gib=n.memory_gib, vcpus=round(n.vcpus_per_gpu * count, 2),
                  memory_gib=round(n.memory_gib_per_gpu * count, 2), price_per_hour=price_per_gpu_hour * count,
                  spot_price_per_hour=None, billing_granularity_s=1, min_billing_s=0)
            for (gpu, count), n in sorted(best.items())]
