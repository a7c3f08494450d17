"""Cost caps with the FakeProvider, a real SQLite store and a fake clock: enforced before launch
(worst case until the decision point) and while running (a clean stop with a final checkpoint).

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Policy
from gpuorch.money.cost import attempt_cost, price_changes
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import AttemptStatus, Checkpoint, Event, Job, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

POLICY = Policy(decision_interval_s=30, stop_grace_s=60)  # horizon 2 x 30 + 60 = 120 s
SPEC = {"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}
SPOT = 1.2  # USD/h: the fake's cheapest A100 spot offer
# A launch's worst case: its runway (checkpoint interval 60 s + one 30 s pass) and the horizon,
# 1.2 x (90 + 120) s = $0.07.


def submit(store, clock, **overrides):
    return jobs.submit(store, parse_spec({**SPEC, **overrides}), clock.now())


def drive(rec, clock, seconds, step=5.0):
    for _ in range(int(seconds / step)):
        rec.run_pass()
        clock.advance(step)
    rec.run_pass()


def spent(store, job_id, clock) -> float:
    return sum(attempt_cost(a, clock.now()) for a in attempts(store, job_id))


@pytest.fixture
def fake(clock):
    return FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=60))


def reconciler(store, fake, clock, **policy):
    return Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(**{**POLICY.__dict__, **policy}))


def test_job_cap_stops_cleanly_with_a_final_checkpoint_before_it_is_crossed(store, fake, clock):
    rec = reconciler(store, fake, clock)
    job = submit(store, clock, budget={"max_cost": 0.10})
    drive(rec, clock, 400, step=7)  # 7: the stop does not coincide with a periodic checkpoint
    j = job_row(store, job.id)
    [a] = attempts(store, job.id)
    assert j.status == JobStatus.BUDGET_EXHAUSTED and j.finished_at is not None
    assert (a.status, a.reason) == (AttemptStatus.ENDED, TerminationReason.BUDGET_EXHAUSTED)
    assert ("runner.request_stop", a.instance_id) in fake.calls
    with store.read() as s:
        final = s.exec(select(Checkpoint).where(Checkpoint.final == True)).one()  # noqa: E712
        kinds = [e.kind for e in s.exec(select(Event).where(Event.job_id == job.id))]
    assert final.attempt == 1 and a.last_checkpoint == final.name  # the work is saved
    assert "stop_requested" in kinds
    assert 0.10 - SPOT * 150 / 3600 < spent(store, job.id, clock) <= 0.10  # used, never crossed
    assert fake.live_instances() == []


def test_launch_refused_when_the_worst_case_does_not_fit(store, fake, clock):
    rec = reconciler(store, fake, clock)
    job = submit(store, clock, budget={"max_cost": 0.06})  # < $0.07 worst case of the cheapest offer
    rec.run_pass()
    j = job_row(store, job.id)
    assert j.status == JobStatus.BUDGET_EXHAUSTED and "job budget $0.06 has $0.0600 left" in j.message
    assert fake.count("launch") == 0 and attempts(store, job.id) == []


def test_worst_case_uses_the_billing_minimum_and_increment(store, clock):
    from gpuorch.testing.fake_provider import default_offers

    hourly = [o.model_copy(update={"billing_granularity_s": 3600, "min_billing_s": 3600}) for o in default_offers()]
    fake = FakeProvider(clock, offers=hourly, script=FakeJobScript(duration_s=600))
    rec = reconciler(store, fake, clock)
    poor = submit(store, clock, name="poor", budget={"max_cost": 1.19})  # one hour of 1.2 does not fit
    rich = submit(store, clock, name="rich", budget={"max_cost": 1.21})
    drive(rec, clock, 700, step=20)
    assert job_row(store, poor.id).status == JobStatus.BUDGET_EXHAUSTED
    assert job_row(store, rich.id).status == JobStatus.SUCCEEDED
    assert spent(store, rich.id, clock) == pytest.approx(1.2)  # ten minutes, billed for the hour


def test_two_jobs_in_one_pass_cannot_both_take_the_last_dollars(store, fake, clock):
    rec = reconciler(store, fake, clock, daily_cap=0.10)  # room for one worst case of $0.07
    first, second = submit(store, clock, name="first"), submit(store, clock, name="second")
    rec.run_pass()
    assert len(attempts(store, first.id)) == 1 and attempts(store, second.id) == []
    assert job_row(store, second.id).status == JobStatus.QUEUED
    assert "running attempts hold the rest" in job_row(store, second.id).message
    assert fake.count("launch") == 1


def test_admission_inside_the_launch_transaction_catches_what_a_stale_gate_missed(store, fake, clock):
    """Two daemons, one job each, one daily cap: the second decides on a ledger read before the
    first launched, and is refused by the check inside its own launch transaction."""
    a, b = submit(store, clock, name="a"), submit(store, clock, name="b")
    with store.write() as s:
        for job, owner in ((a, "d1"), (b, "d2")):
            row = s.get(Job, job.id)
            row.lease_owner, row.lease_expires = owner, datetime(2030, 1, 1, tzinfo=UTC)
    d1, d2 = (Reconciler(store, {"fake": fake}, clock=clock, owner=o, budget=Policy(daily_cap=0.10, **{
        "decision_interval_s": 30, "stop_grace_s": 60})) for o in ("d1", "d2"))
    real_gate = d2.money.gate

    def stale_gate(view, now):
        gate = real_gate(view, now)  # sees all $0.10 free
        d1.run_pass()  # meanwhile the other daemon launches job a
        return gate

    d2.money.gate = stale_gate
    d2.run_pass()
    assert len(attempts(store, a.id)) == 1 and attempts(store, b.id) == []
    assert "does not fit the budget" in job_row(store, b.id).message
    assert fake.count("launch") == 1


def test_daily_cap_pauses_running_jobs_and_resumes_them_the_next_day(store, fake, clock):
    clock.advance(23 * 3600)  # 23:00 UTC
    rec = reconciler(store, fake, clock, daily_cap=0.5)
    job = submit(store, clock)
    drive(rec, clock, 59 * 60, step=15)  # until 23:59: the day's $0.50 lasts about 25 minutes at $1.20/h
    j = job_row(store, job.id)
    [a1] = attempts(store, job.id)
    assert j.status == JobStatus.QUEUED and "daily budget" in j.message and j.not_before.day == 2
    assert a1.reason == TerminationReason.BUDGET_EXHAUSTED and a1.last_checkpoint is not None
    assert spent(store, job.id, clock) <= 0.5
    drive(rec, clock, 120, step=15)  # past midnight
    a1, a2 = attempts(store, job.id)
    assert a2.resumed_from == a1.last_checkpoint and job_row(store, job.id).status == JobStatus.RUNNING


def test_spot_price_moves_are_recorded_and_billed(store, fake, clock):
    rec = Reconciler(store, {"fake": fake}, clock=clock, offers_ttl_s=0)  # offers fetched every pass
    job = submit(store, clock)
    drive(rec, clock, 600, step=20)
    fake.set_spot_price("r1-a", "gpu.a100", 2.4)
    drive(rec, clock, 600, step=20)
    [a] = attempts(store, job.id)
    [(when, price)] = price_changes(a)
    assert price == 2.4 and when == pytest.approx(a.launched_at.timestamp() + 600, abs=5)
    assert attempt_cost(a, clock.now()) == pytest.approx((600 * 1.2 + 600 * 2.4) / 3600, rel=0.01)
    with store.read() as s:
        [e] = s.exec(select(Event).where(Event.kind == "spot_price")).all()
    assert "2.4000" in e.message
