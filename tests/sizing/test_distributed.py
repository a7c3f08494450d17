"""The job's declared multi-GPU strategy: validation, sizing, placement and the job's environment."""

from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler.apply.agent_config import agent_config
from gpuorch.sizing import Workload, estimate_memory
from gpuorch.sizing.memory import sharding_options
from gpuorch.store.models import Attempt, Job

BASE = {"name": "j", "run": "python train.py"}


def spec(**fields):
    return parse_spec({**BASE, **fields}, "job.yaml")


def test_an_undeclared_job_is_sized_for_one_gpu():
    s = spec(model={"params": "8B", "method": "full"})
    assert s.distributed is None and s.model.strategy.strategy == "none"
    assert sharding_options(s.model, 8) == ("none",)  # 8 GPUs on offer: still one GPU's memory
    assert estimate_memory(s.model, 8).per_gpu_gib == estimate_memory(s.model, 1).per_gpu_gib


def test_a_gpu_range_leaves_room_for_a_strategy():
    s = spec(resources={"gpu": "H100:1..8"}, distributed={"strategy": "fsdp", "degree": 8})
    assert s.strategy.degree == 8


def test_a_declared_strategy_is_the_only_one_tried():
    s = spec(model={"params": "8B", "method": "full"}, distributed={"strategy": "zero2", "degree": 8})
    assert s.model.distributed == s.distributed and sharding_options(s.model, 8) == ("zero2",)
    assert estimate_memory(s.model, 8).sharding == "zero2"
    # The older model.sharding spelling declares the same thing.
    old = spec(model={"params": "8B", "method": "full", "sharding": "zero3"})
    assert old.distributed is not None and old.distributed.strategy == "zero3"
    # gpuorch estimate without a strategy explores them all, least communication first.
    assert sharding_options(Workload(params="8B", method="full"), 8) == ("ddp", "zero2", "zero3")


@pytest.mark.parametrize("fields, message", [
    ({"resources": {"gpu": "A100:1"}, "distributed": {"strategy": "zero3"}},
     "job.yaml: distributed: zero3 with one GPU (resources.gpu: A100:1) shards nothing"),
    ({"resources": {"gpu": "H100:1..1"}, "distributed": {"strategy": "fsdp"}},
     "job.yaml: distributed: fsdp with one GPU (resources.gpu: H100:1..1) shards nothing"),
    ({"distributed": {"strategy": "fsdp", "degree": 1}}, "job.yaml: distributed: fsdp with degree 1 (one GPU)"),
    ({"distributed": {"strategy": "none", "degree": 4}}, "job.yaml: distributed: strategy none runs on one GPU"),
    ({"resources": {"gpu": "H100:4"}, "distributed": {"strategy": "fsdp", "degree": 8}},
     "job.yaml: distributed.degree: 8 GPUs, but resources.gpu asks for 4"),
    ({"model": {"params": "8B", "method": "inference"}, "distributed": {"strategy": "zero3"}},
     "job.yaml: distributed: zero3 shards training state; inference spreads over GPUs with strategy tp"),
    ({"model": {"params": "8B", "distributed": {"strategy": "ddp"}}, "distributed": {"strategy": "fsdp"}},
     "job.yaml: distributed: given twice, differently"),
    ({"distributed": {"strategy": "pipeline"}}, "job.yaml: distributed.strategy:"),
])
def test_contradictions_get_one_line_naming_the_field(fields, message):
    with pytest.raises(UserInputError) as e:
        spec(**fields)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def _env(s, gpu_count):
    job = Job(id=7, name="j", spec=s.model_dump_json())
    attempt = Attempt(job_id=7, number=1, provider="fake", region="r", zone="z", instance_type="x", gpu="H100",
                      gpu_count=gpu_count)
    return agent_config(job, s, attempt).env


def test_the_job_environment_says_the_strategy_and_degree():
    env = _env(spec(), 8)
    assert (env["GPUORCH_DISTRIBUTED"], env["GPUORCH_DISTRIBUTED_DEGREE"]) == ("none", "1")
    env = _env(spec(distributed={"strategy": "fsdp"}), 8)
    assert (env["GPUORCH_DISTRIBUTED"], env["GPUORCH_DISTRIBUTED_DEGREE"]) == ("fsdp", "8")  # every GPU of the offer
    env = _env(spec(model={"params": "70B", "method": "inference"}, distributed={"strategy": "tp", "degree": 2}), 8)
    assert (env["GPUORCH_DISTRIBUTED"], env["GPUORCH_DISTRIBUTED_DEGREE"]) == ("tp", "2")
    assert "GPUORCH_DISTRIBUTED" not in spec().env  # set by gpuorch, not stored in the spec


def test_tensor_parallel_inference_runs_replicas_on_the_other_gpus():
    from gpuorch import gpus
    from gpuorch.sizing.runtime import decode_tokens_per_s

    w = Workload(params="70B", method="inference", distributed={"strategy": "tp", "degree": 2}, tokens="1M")
    h100 = gpus.lookup("H100")
    two, eight = decode_tokens_per_s(w, h100, 2, "nvlink", "tp"), decode_tokens_per_s(w, h100, 8, "nvlink", "tp")
    assert eight == pytest.approx(4 * two)  # 4 replicas of 2-way tensor parallel
    assert estimate_memory(w, 2, "tp").breakdown["weights"] == pytest.approx(
        estimate_memory(w, 1, "none").breakdown["weights"] / 2)


@pytest.mark.parametrize("fields", [{}, {"distributed": {"strategy": "fsdp", "degree": 4}},
                                    {"model": {"params": "8B", "distributed": {"strategy": "zero2"}}}])
def test_a_stored_spec_reads_back_the_same(fields):
    """The store keeps the validated spec as JSON and the daemon parses it again, any number of times."""
    first = spec(model={"params": "8B", "method": "full"}, **fields) if "model" not in fields else spec(**fields)
    again = parse_spec(first.model_dump(mode="json"))
    assert again == first and parse_spec(again.model_dump(mode="json")) == again
    assert again.strategy == first.strategy
