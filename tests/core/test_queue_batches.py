"""A long queue drains in bounded batches: each pass launches at most ``Settings.launch_batch``
queued jobs and asks to run again at once, and still looks at every running job (a notice is
handled in a pass that leaves queued jobs for the next). Real SQLite, FakeProvider, fake clock."""

from __future__ import annotations

from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def statuses(store) -> list[JobStatus]:  # type: ignore[no-untyped-def]
    with store.read() as s:
        return [j.status for j in s.exec(select(Job).order_by(Job.id))]  # type: ignore[arg-type]


def test_a_queue_drains_in_batches_and_each_pass_asks_for_the_next_at_once(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=3))
    for i in range(7):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    waits, launched = [], []
    for _ in range(3):
        waits.append(rec.run_pass())
        launched.append(sum(s != JobStatus.QUEUED for s in statuses(store)))
    assert launched == [3, 6, 7]
    assert waits[0] == 0 and waits[1] == 0 and waits[2] > 0
    assert statuses(store)[:3] != [JobStatus.QUEUED] * 3  # in claim order: the oldest first


def test_a_notice_is_handled_in_a_pass_that_leaves_queued_jobs_for_the_next(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(launch_batch=1))
    first = jobs.submit(store, parse_spec({**SPEC, "name": "running"}), clock.now()).id
    for _ in range(4):
        rec.run_pass()
        clock.advance(2)
    assert statuses(store) == [JobStatus.RUNNING]
    for i in range(3):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == first)).one().instance_id
    fake.inject_preemption(inst, 120.0)
    rec.run_pass()
    with store.read() as s:
        drained = s.exec(select(Attempt).where(Attempt.job_id == first, Attempt.number == 1)).one()
    assert drained.status == AttemptStatus.DRAINING  # the notice, in this very pass
    assert statuses(store).count(JobStatus.QUEUED) == 2  # one queued job launched; two wait a pass
