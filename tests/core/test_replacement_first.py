"""A replacement launch is not held back by the pass's batch of first launches: its intent is
recorded (and its cloud call started) while the pass is still going through the other jobs, so a
preempted job's decision latency does not grow with the number of jobs. First launches of a queue
are still recorded a batch at a time. Real SQLite, FakeProvider, fake clock; the order of the
pass's calls is logged, no time measured.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def test_a_replacement_is_launched_before_the_pass_reaches_the_later_jobs(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"r{i}"}), clock.now()).id for i in range(6)]
    for _ in range(4):
        rec.run_pass()
        clock.advance(2)
    with store.read() as s:
        assert [j.status for j in s.exec(select(Job).order_by(Job.id))] == [JobStatus.RUNNING] * 6  # type: ignore[arg-type]
        first = s.exec(select(Attempt).where(Attempt.job_id == ids[0])).one()
    fake.vanish(first.instance_id or "")  # reclaimed without a notice
    for i in range(3):  # queued behind the running jobs: their first launches are batched
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())

    log: list[tuple[str, int]] = []
    view, intent, intents = rec._view, rec.applier.launching.intent, rec.applier.launching.intents

    def logged_view(job, *a, **k):  # type: ignore[no-untyped-def]
        log.append(("view", job.id))
        return view(job, *a, **k)

    def logged_intent(v, *a, **k):  # type: ignore[no-untyped-def]
        log.append(("intent", v.job.id))
        return intent(v, *a, **k)

    def logged_intents(batch, *a, **k):  # type: ignore[no-untyped-def]
        log.extend(("batched", v.job.id) for v, _ in batch)
        return intents(batch, *a, **k)

    rec._view, rec.applier.launching.intent, rec.applier.launching.intents = (  # type: ignore[method-assign]
        logged_view, logged_intent, logged_intents)
    rec.run_pass()
    assert ("intent", ids[0]) in log, log
    assert log.index(("intent", ids[0])) < log.index(("view", ids[-1]))  # before the later jobs are viewed
    assert sorted(j for what, j in log if what == "batched") == sorted(
        j for what, j in log if what == "view" and j not in ids)  # the queued jobs: one batch
    with store.read() as s:
        replacement = s.exec(select(Attempt).where(Attempt.job_id == ids[0], Attempt.number == 2)).one()
    assert replacement is not None
