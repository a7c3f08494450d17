"""How much a multi-node job loses to the network between its nodes (docs/sizing.md, "Runtime").

Per optimiser step each node sends what the job's strategy communicates across nodes over its
fabric; the step waits for whatever of that the compute does not hide:

    compute  = tokens per GPU per step / tokens per second per GPU inside one node
    network  = bytes each node sends across nodes / (node Gb/s / 8 * BUS_EFFICIENCY[kind])
    factor   = compute / (max(compute, network) + EXPOSED * min(compute, network))

Bytes per node per step, m nodes, collectives over every GPU (NCCL's rings cross each node's
NICs once per pass: a node's share of an all-gather or reduce-scatter of S bytes is (m-1)/m * S,
of an all-reduce 2 (m-1)/m * S):

- ``ddp`` (and ``tp`` groups replicated across nodes): all-reduce of the trainable gradients;
- ``zero2``: reduce-scatter of the gradients and all-gather of the updated 16-bit weights;
- ``zero3`` / ``fsdp``: two all-gathers of the weights (forward, backward) in their storage dtype
  and a reduce-scatter of the trainable gradients.

Gradients travel in fp32 with an fp32 master copy (PyTorch AMP, torchtitan's default
``mixed_precision_reduce``), else 16-bit; LoRA/QLoRA gradients are the adapters'. A step is one
micro-batch (gradient accumulation would amortise DDP's all-reduce: the estimate is conservative).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuorch.sizing.memory import weight_bytes
from gpuorch.sizing.workload import Workload

FabricKind = Literal["infiniband", "rdma", "efa", "tcpx", "ethernet"]
FABRIC_KINDS: tuple[str, ...] = ("infiniband", "rdma", "efa", "tcpx", "ethernet")

# Achieved NCCL bus bandwidth over the line rate, large messages, several nodes:
# - InfiniBand / RoCE RDMA: 330.9 GB/s all-reduce across 4 nodes of 8 H100 with 3.2 Tb/s IB
#   (Voltage Park / AI@GT benchmark suite, github.com/aigatech/vpbenchmarking): 0.83;
# - EFA: 29.6 GB/s all-reduce across 4 p4dn.24xlarge (400 Gb/s EFA, NCCL 2.9.9;
#   github.com/NVIDIA/nccl/issues/527): 0.59;
# - GPUDirect-TCPX(O) and plain Ethernet (TCP sockets): an assumption, 0.5.
BUS_EFFICIENCY: dict[str, float] = {"infiniband": 0.83, "rdma": 0.83, "efa": 0.59, "tcpx": 0.5, "ethernet": 0.5}
# Share of the shorter of compute and network that overlap does not hide (*calibrated* on
# torchtitan's 128-H100 run against its 8-H100 one: tests/data/runtime-calibration.yaml).
EXPOSED = 0.41
UNKNOWN_GBPS = 100.0  # a node whose family is not known: plain 100 Gb/s Ethernet (assumption)


@dataclass(frozen=True)
class Fabric:
    """The network between nodes: its kind and each node's line rate in Gb/s."""

    kind: str
    gbps: float

    @property
    def bytes_per_s(self) -> float:
        return self.gbps / 8 * 1e9 * BUS_EFFICIENCY.get(self.kind, BUS_EFFICIENCY["ethernet"])


UNKNOWN_FABRIC = Fabric("ethernet", UNKNOWN_GBPS)


def parse_fabric(text: str) -> Fabric:
    """``KIND:GBPS`` (``efa:3200``, ``infiniband:1600``, ``ethernet:100``). Raises ValueError
    with the fix."""
    kind, sep, gbps = text.strip().lower().partition(":")
    try:
        rate = float(gbps) if sep else 0.0
    except ValueError:
        rate = 0.0
    if kind not in FABRIC_KINDS or rate <= 0:
        raise ValueError(f"{text!r} is not KIND:GBPS; give one of {', '.join(FABRIC_KINDS)} and the Gb/s per node, "
                         "e.g. efa:3200")
    return Fabric(kind, rate)


def _grad_bytes(w: Workload) -> float:
    if w.method == "full":
        return (4.0 if w.uses_master else 2.0) * w.n_params
    return (4.0 if w.knobs.adapter_dtype == "fp32" else 2.0) * w.trainable_params


def bytes_per_node_step(w: Workload, sharding: str, nodes: int) -> float:
    """Bytes each node sends across nodes per optimiser step (module docstring)."""
    if nodes <= 1 or not w.training:
        return 0.0
    share = (nodes - 1) / nodes
    grads = _grad_bytes(w)
    if sharding in ("zero3", "fsdp"):
        return share * (2 * weight_bytes(w) + grads)
    if sharding == "zero2":
        return share * (grads + 2.0 * (w.n_params if w.method == "full" else w.trainable_params))
    return 2 * share * grads  # ddp, tp replicas, none


def node_factor(w: Workload, sharding: str, nodes: int, fabric: Fabric | None, tokens_per_gpu_s: float) -> float:
    """Share of one node's per-GPU speed a ``nodes``-node job keeps (1.0 on one node).
    ``tokens_per_gpu_s``: the per-GPU rate inside one node. Inference replicas do not talk."""
    volume = bytes_per_node_step(w, sharding, nodes)
    if volume <= 0 or tokens_per_gpu_s <= 0:
        return 1.0
    compute = w.seq_len * w.micro_batch / tokens_per_gpu_s
    link = fabric if fabric is not None and fabric.gbps > 0 else UNKNOWN_FABRIC  # 0: not published
    network = volume / link.bytes_per_s
    return compute / (max(compute, network) + EXPOSED * min(compute, network))
