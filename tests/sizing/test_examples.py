"""The example jobs of configs/examples plan to the offer an expert would pick (docs/sizing.md,
"Example jobs"), over the shipped price list: the kind of machine is asserted, not the listing,
so new offers in the price list may change the row but not the reasoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuorch import gpus, placement
from gpuorch.jobs.spec import load_spec
from gpuorch.provider.catalog import load_offers

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"


def best(name: str):
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    result = placement.plan(spec, load_offers(), limit=5)
    assert result.candidates, name
    return spec, result.candidates[0]


def test_8b_qlora_at_4k_takes_one_gpu_not_a_node():
    spec, c = best("qlora-8b-4k")
    assert c.offer.gpu_count == 1 and c.gpus_used == 1 and c.sharding == "none"
    assert 19 < c.per_gpu_gib < 22.35 * 0.95  # a 24 GB card would hold it: the eager loss at 4k dominates


def test_70b_qlora_takes_one_80gb_class_card():
    spec, c = best("qlora-70b")
    assert c.offer.gpu_count == 1 and gpus.lookup(c.offer.gpu).usable >= 79
    assert c.per_gpu_gib > 44.7  # a 48 GB card is refused with PEFT's fp32 upcast


def test_8b_full_fine_tuning_takes_an_8_gpu_nvlink_node_sharded_zero3():
    spec, c = best("full-8b-8gpu")
    assert c.offer.gpu_count == 8 and c.gpus_used == 8 and c.sharding == "zero3"
    assert c.offer.interconnect in gpus.FAST_LINKS


def test_70b_bf16_inference_spreads_tensor_parallel_over_enough_memory():
    spec, c = best("inference-70b-bf16")
    spec_gpu = gpus.lookup(c.offer.gpu)
    assert c.gpus_used * spec_gpu.usable >= 140  # 131 GiB of weights + the KV cache
    assert c.sharding == ("tp" if c.gpus_used > 1 else "none")


@pytest.mark.parametrize("name", ["qlora-8b-4k", "qlora-70b", "full-8b-8gpu", "inference-70b-bf16", "lora-13b"])
def test_every_example_validates_and_plans(name):
    spec, c = best(name)
    assert c.est_hours > 0 and c.per_gpu_gib is not None


def test_13b_lora_takes_one_card_with_40gb_or_more():
    spec, c = best("lora-13b")
    assert c.offer.gpu_count == 1 and gpus.lookup(c.offer.gpu).usable >= 40
