"""GCP's catalog: shipped rows (``data/offers.csv``), GPU machine families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without the SDK or
pydantic). Billing: Compute Engine (VMs, GPUs, spot VMs) bills per second with a 1 minute
minimum. Families: the GPU machine-type pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family, Shape

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("gcp", r"g2-standard-", "L4", 8, "pcie", 100),
    Family("gcp", r"a2-(highgpu|megagpu)-", "A100", 16, "nvlink", 100),
    Family("gcp", r"a2-ultragpu-", "A100-80GB", 8, "nvlink", 100),
    Family("gcp", r"a3-highgpu-", "H100", 8, "nvlink", 1000, "tcpx"),
    Family("gcp", r"a3-megagpu-", "H100", 8, "nvlink", 1800, "tcpx"),
    Family("gcp", r"a3-ultragpu-", "H200", 8, "nvlink", 3200, "rdma"),
    Family("gcp", r"a4-highgpu-", "B200", 8, "nvlink", 3200, "rdma"),
    # N1 VMs with attached GPUs, named ``n1-standard-8+nvidia-tesla-t4x2`` (n1_instance_type); N1's
    # network is 2 Gbps per vCPU up to 32 Gbps.
    Family("gcp", r"n1-\w+-\d+\+nvidia-tesla-t4x", "T4", 4, "pcie", 32),
    Family("gcp", r"n1-\w+-\d+\+nvidia-tesla-v100x", "V100", 8, "nvlink", 32),
)

# GPUs, vCPUs and RAM (GB as GCP lists it) per machine type, for the row audit: Compute Engine's
# accelerator-optimized and G2 machine-type tables (cloud.google.com/compute/docs/accelerator-optimized-machines).
_GCE = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
SHAPES: tuple[Shape, ...] = (
    Shape("g2-standard-4", 1, 4, 16, _GCE),
    Shape("g2-standard-8", 1, 8, 32, _GCE),
    Shape("a2-highgpu-1g", 1, 12, 85, _GCE),
    Shape("a2-ultragpu-1g", 1, 12, 170, _GCE),
    Shape("a3-highgpu-1g", 1, 26, 234, _GCE),
    Shape("a3-highgpu-8g", 8, 208, 1872, _GCE),
    Shape("a3-megagpu-8g", 8, 208, 1872, _GCE),
    Shape("a3-ultragpu-8g", 8, 224, 2952, _GCE),
    Shape("a4-highgpu-8g", 8, 224, 3968, _GCE),
)

# N1 VMs take attached GPUs (``guestAccelerators``); GCE allows each GPU model and count only up to
# a vCPU and memory limit (GB as GCE lists it): the N1 tables of cloud.google.com/compute/docs/gpus
# ("NVIDIA T4 GPUs", "NVIDIA V100 GPUs", "NVIDIA P100 GPUs", "NVIDIA P4 GPUs"). P100 x4 allows 96
# vCPUs in most zones but 64 in some: 64 here.
_GPUS = "https://cloud.google.com/compute/docs/gpus"
N1_GPU_LIMITS: dict[str, dict[int, tuple[int, int]]] = {  # accelerator type -> count -> (max vCPUs, max GB)
    "nvidia-tesla-t4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "nvidia-tesla-v100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
    "nvidia-tesla-p100": {1: (16, 104), 2: (32, 208), 4: (64, 208)},
    "nvidia-tesla-p4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
}
# The predefined N1 sizes priced with GPUs: vCPUs -> GB of RAM (3.75 and 6.5 GB per vCPU), from
# cloud.google.com/compute/docs/general-purpose-machines#n1_machine_types.
N1_SIZES: dict[str, dict[int, float]] = {
    "n1-standard": {n: 3.75 * n for n in (1, 2, 4, 8, 16, 32, 64, 96)},
    "n1-highmem": {n: 6.5 * n for n in (2, 4, 8, 16, 32, 64, 96)},
}
# fmt: on


def n1_instance_type(machine_type: str, accelerator: str, count: int) -> str:
    """The catalog's name of an N1 VM with attached GPUs: ``n1-standard-8+nvidia-tesla-t4x2``
    (one row per machine type, GPU and count, so the (zone, instance type) key stays unique)."""
    return f"{machine_type}+{accelerator}x{count}"


def split_instance_type(instance_type: str) -> tuple[str, str | None, int]:
    """``n1-standard-8+nvidia-tesla-t4x2`` -> ``("n1-standard-8", "nvidia-tesla-t4", 2)``;
    a plain machine type -> ``(it, None, 0)``."""
    machine, plus, attached = instance_type.partition("+")
    accel, x, count = attached.rpartition("x")
    if not plus or not x or not count.isdigit():
        return instance_type, None, 0
    return machine, accel, int(count)


def n1_shapes() -> tuple[tuple[str, str, int, int, float], ...]:
    """Every (machine type, accelerator, count, vCPUs, GB) N1_GPU_LIMITS allows."""
    return tuple((f"{series}-{vcpus}", accel, count, vcpus, gb)
                 for accel, limits in N1_GPU_LIMITS.items() for count, (max_vcpus, max_gb) in limits.items()
                 for series, sizes in N1_SIZES.items() for vcpus, gb in sizes.items()
                 if vcpus <= max_vcpus and gb <= max_gb)


SHAPES += tuple(Shape(n1_instance_type(m, a, c), c, v, gb, _GPUS) for m, a, c, v, gb in n1_shapes())

# Persistent Disk per GiB-month of provisioned capacity in us-central1 (cloud.google.com/compute/
# disks-image-pricing, 2026-12: its example bills 200 GB of standard PD $8.00 and of SSD PD $34.00
# a month): pd-balanced (the default volume_type) $0.10, pd-ssd $0.17, pd-standard $0.04. Hyperdisk
# types bill capacity plus provisioned IOPS and throughput: the pd-balanced rate stands for them.
CATALOG = AdapterCatalog(
    provider="gcp", billing=BillingRule(1, 60), families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv", builder="gpuorch_gcp.snapshot:build",
    shapes=SHAPES, storage_usd_per_gib_month=0.10,
    storage_rates=(("pd-balanced", 0.10), ("pd-ssd", 0.17), ("pd-standard", 0.04)),
)
