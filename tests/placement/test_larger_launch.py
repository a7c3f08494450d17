"""The daemon launches a job on a larger instance only when the job allows it, and says so.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Offer
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Event, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider


def eight_a100() -> Offer:
    return Offer(provider="fake", region="r1", zone="r1-a", instance_type="gpu.8xa100", gpu="A100", gpu_count=8,
                 gpu_memory_gib=40, vcpus=96, memory_gib=1152, price_per_hour=20.0, spot_price_per_hour=None,
                 billing_granularity_s=1, min_billing_s=60, interconnect="nvlink")


def run_one_pass(store, clock, resources):
    fake = FakeProvider(clock, offers=[eight_a100()], script=FakeJobScript(duration_s=300))
    job = jobs.submit(store, parse_spec({"name": "one", "run": "x", "resources": resources}), clock.now())
    Reconciler(store, {"fake": fake}, clock=clock).run_pass()
    with store.read() as s:
        found = s.exec(select(Event).where(Event.job_id == job.id, Event.kind == "launch_requested")).all()
        return s.get(Job, job.id).status, [e.message for e in found]


def test_exact_count_waits_rather_than_renting_eight(store, clock):
    status, launched = run_one_pass(store, clock, {"gpu": "A100:1"})
    assert status == JobStatus.QUEUED and launched == []


def test_allowed_larger_launch_names_the_gpus_it_leaves_idle(store, clock):
    status, launched = run_one_pass(store, clock, {"gpu": "A100:1", "allow_larger": True})
    assert status == JobStatus.STARTING
    assert launched == ["fake r1-a gpu.8xa100 on-demand at $20.000/h (8 GPUs, the job uses 1)"]
