"""Instance families that carry GPUs, and how their GPUs talk inside one node and between nodes.

Sources: the providers' instance-type pages (docs/sizing.md, "Instance families"). ``link``
is the GPU-to-GPU path inside the node; a family with one GPU per instance has none in use.
``network_gbps`` is the instance's network for multi-node jobs (EFA, InfiniBand, GPUDirect-TCPX).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    provider: str
    pattern: str  # regular expression on the instance type
    gpu: str
    max_gpus: int
    link: str  # nvlink | pcie | infinity-fabric
    network_gbps: float


# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("aws", r"g4dn\.", "T4", 8, "pcie", 100),
    Family("aws", r"p3\.", "V100", 8, "nvlink", 25),
    Family("aws", r"p3dn\.", "V100-32GB", 8, "nvlink", 100),
    Family("aws", r"g5\.", "A10G", 8, "pcie", 100),
    Family("aws", r"g6\.", "L4", 8, "pcie", 100),
    Family("aws", r"g6e\.", "L40S", 8, "pcie", 400),
    Family("aws", r"p4d\.", "A100", 8, "nvlink", 400),
    Family("aws", r"p4de\.", "A100-80GB", 8, "nvlink", 400),
    Family("aws", r"p5\.", "H100", 8, "nvlink", 3200),
    Family("aws", r"p5en?\.", "H200", 8, "nvlink", 3200),
    Family("aws", r"p6-b200\.", "B200", 8, "nvlink", 3200),
    Family("gcp", r"g2-standard-", "L4", 8, "pcie", 100),
    Family("gcp", r"a2-(highgpu|megagpu)-", "A100", 16, "nvlink", 100),
    Family("gcp", r"a2-ultragpu-", "A100-80GB", 8, "nvlink", 100),
    Family("gcp", r"a3-highgpu-", "H100", 8, "nvlink", 1000),
    Family("gcp", r"a3-megagpu-", "H100", 8, "nvlink", 1800),
    Family("gcp", r"a3-ultragpu-", "H200", 8, "nvlink", 3200),
    Family("gcp", r"a4-highgpu-", "B200", 8, "nvlink", 3200),
    Family("azure", r"Standard_NC\d+as_T4_v3", "T4", 4, "pcie", 32),
    Family("azure", r"Standard_ND40rs_v2", "V100-32GB", 8, "nvlink", 100),
    Family("azure", r"Standard_NV\d+ads_A10_v5", "A10", 2, "pcie", 40),
    Family("azure", r"Standard_NC\d+ads_A100_v4", "A100-80GB", 4, "pcie", 80),
    Family("azure", r"Standard_ND96asr_v4", "A100", 8, "nvlink", 1600),
    Family("azure", r"Standard_ND96amsr_A100_v4", "A100-80GB", 8, "nvlink", 1600),
    Family("azure", r"Standard_NC\d+adi?s_H100_v5", "H100-PCIE", 2, "pcie", 80),
    Family("azure", r"Standard_ND96isr_H100_v5", "H100", 8, "nvlink", 3200),
    Family("azure", r"Standard_ND96isr_H200_v5", "H200", 8, "nvlink", 3200),
    Family("azure", r"Standard_ND96isr_MI300X_v5", "MI300X", 8, "infinity-fabric", 3200),
)
# fmt: on


def family_of(provider: str, instance_type: str) -> Family | None:
    for f in FAMILIES:
        if f.provider == provider and re.match(f.pattern, instance_type):
            return f
    return None


def interconnect_for(provider: str, instance_type: str, gpu_count: int) -> str | None:
    """The GPU-to-GPU link of a multi-GPU instance; None for one GPU or an unknown family."""
    if gpu_count <= 1:
        return None
    f = family_of(provider, instance_type)
    return f.link if f else None
