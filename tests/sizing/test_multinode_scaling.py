"""The node factor (gpuorch/sizing/fabric.py) against published multi-node scaling
(tests/data/multinode-scaling.yaml), and its formula by hand."""

from __future__ import annotations

import pytest

from gpuorch import gpus
from gpuorch.sizing import Workload
from gpuorch.sizing.fabric import BUS_EFFICIENCY, EXPOSED, Fabric, bytes_per_node_step, node_factor
from gpuorch.sizing.runtime import training_tokens_per_s
from tests.sizing import multinode_scaling as ms

PAIRS = ms.load()
H100 = gpus.lookup("H100")


def test_published_pairs_with_sources_and_held_out_points():
    assert len(PAIRS) >= 4 and all(p.source.startswith("https://") for p in PAIRS)
    assert [p.role for p in PAIRS].count("calibration") == 1 and sum(p.role == "holdout" for p in PAIRS) >= 3


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_scaling_ratio_within_three_points(pair):
    assert abs(pair.predicted() - pair.measured) <= 0.03, f"{pair.id}: {pair.predicted():.3f} vs {pair.measured:.3f}"


def test_bytes_per_node_follow_the_strategy():
    full = Workload(preset="llama-3.1-8b", method="full", seq_len=4096)
    n = full.n_params
    # fp32 master: gradients reduce in fp32. FSDP gathers the 16-bit weights twice and reduce-scatters.
    assert bytes_per_node_step(full, "fsdp", 2) == pytest.approx(0.5 * (2 * 2 * n + 4 * n))
    assert bytes_per_node_step(full, "ddp", 4) == pytest.approx(2 * 0.75 * 4 * n)
    assert bytes_per_node_step(full, "zero2", 2) == pytest.approx(0.5 * (4 * n + 2 * n))
    assert bytes_per_node_step(full, "fsdp", 1) == 0
    # LoRA over DDP sends only the adapters' gradients: tiny next to full fine-tuning.
    lora = Workload(preset="llama-3.1-8b", method="lora", seq_len=4096)
    assert bytes_per_node_step(lora, "ddp", 2) < bytes_per_node_step(full, "ddp", 2) / 100
    inference = Workload(preset="llama-3.1-8b", method="inference")
    assert bytes_per_node_step(inference, "tp", 4) == 0


def test_node_factor_by_hand_and_by_fabric():
    w = Workload(preset="llama-3.1-8b", method="full", seq_len=8192, micro_batch=2)
    rate = 5000.0  # tokens/s per GPU inside one node
    compute = 8192 * 2 / rate
    eth = Fabric("ethernet", 100)
    network = bytes_per_node_step(w, "fsdp", 2) / (100 / 8 * 1e9 * BUS_EFFICIENCY["ethernet"])
    assert network > compute  # 100 Gb/s Ethernet cannot hide an 8B FSDP step
    assert node_factor(w, "fsdp", 2, eth, rate) == pytest.approx(compute / (network + EXPOSED * compute))
    fast = node_factor(w, "fsdp", 2, Fabric("efa", 3200), rate)
    assert node_factor(w, "fsdp", 2, eth, rate) < node_factor(w, "fsdp", 2, Fabric("efa", 400), rate) < fast < 1
    assert node_factor(w, "fsdp", 1, eth, rate) == 1.0


def test_whole_configuration_rate_counts_every_node():
    w = Workload(preset="llama-3.1-8b", method="full", seq_len=8192, micro_batch=2, distributed={"strategy": "fsdp"})
    one = training_tokens_per_s(w, H100, 8, "nvlink", "fsdp")
    two = training_tokens_per_s(w, H100, 16, "nvlink", "fsdp", 2, Fabric("rdma", 3200))
    slow = training_tokens_per_s(w, H100, 16, "nvlink", "fsdp", 2, Fabric("ethernet", 100))
    assert 1.9 * one < two < 2 * one and slow < one  # a slow fabric can make two nodes slower than one
