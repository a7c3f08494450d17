"""Costs from the cloud's record (issue 12, item 6): an attempt is billed from the provider's
launch time to its stop or termination time, not to when the daemon saw the end. The FakeProvider
reports both (``created_at``; ``ended_at`` at a reclaim's deadline or our terminate), with a real
SQLite store and a fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Policy
from gpuorch.money.cost import attempt_cost
from gpuorch.money.record import as_seen, billed_end, billed_start, corrections
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
SPEC = {"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}
SPOT = 1.2  # USD/h, the fake's cheapest A100 spot offer: per-second billing, a 60 s minimum


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def row(**kw) -> Attempt:
    base = dict(job_id=1, number=1, provider="fake", region="r1", zone="r1-a", instance_type="gpu.a100",
                price_per_hour=SPOT, billing_granularity_s=1, min_billing_s=60, requested_at=at(0), launched_at=at(2),
                status=AttemptStatus.RUNNING)
    return Attempt(**{**base, **kw})


def inst(state=InstanceState.RUNNING, created=None, ended=None) -> Instance:
    return Instance(id="fake-1", provider="fake", region="r1", zone="r1-a", instance_type="gpu.a100", spot=True,
                    state=state, created_at=created, ended_at=ended)


# -- the rules, pure -----------------------------------------------------------------------------
def test_the_billed_times_are_the_clouds_held_inside_what_the_daemon_knows():
    assert billed_start(at(0), at(1.5), at(3)) == at(1.5)
    assert billed_start(at(0), at(-4), at(3)) == at(0)  # before the request: skew
    assert billed_start(at(0), at(9), at(3)) == at(3)  # in our future: skew
    assert billed_start(at(0), None, at(3)) == at(3)  # the cloud says nothing: observation
    assert billed_end(at(2), at(23.8), at(144.5)) == at(23.8)
    assert billed_end(at(2), at(1), at(144.5)) == at(2)
    assert billed_end(at(2), None, at(144.5)) == at(144.5)


def test_corrections_follow_the_listing_and_leave_agreeing_rows_alone():
    now = at(60)
    assert corrections(row(), inst(created=at(1.25)), now) == {"launched_at": at(1.25)}
    assert corrections(row(launched_at=at(1.25)), inst(created=at(1.25)), now) == {}
    assert corrections(row(), inst(created=at(90)), now) == {}  # the cloud's clock ahead: next pass
    ended = row(status=AttemptStatus.ENDED, ended_at=at(30))
    assert corrections(ended, inst(InstanceState.TERMINATED, at(2), at(30.4)), now) == {"ended_at": at(30.4)}
    # A live row's end is the pass's End to record; an alive instance has no end yet.
    assert corrections(row(), inst(InstanceState.TERMINATED, at(2), at(30.4)), now) == {}
    assert corrections(ended, inst(InstanceState.RUNNING, at(2)), now) == {}
    assert corrections(ended, None, now) == {}


def test_the_ledger_counts_an_instance_seen_gone_as_ended_at_the_clouds_time():
    live = row()
    seen = as_seen(live, inst(InstanceState.PREEMPTED, at(2), at(23.8)), at(144.5))
    assert (seen.status, seen.ended_at) == (AttemptStatus.ENDED, at(23.8))
    assert live.status == AttemptStatus.RUNNING and live.ended_at is None  # the stored row is not touched
    assert as_seen(live, inst(), at(144.5)) is live
    assert as_seen(live, None, at(144.5)) is live


# -- the reconciler, across a daemon outage -----------------------------------------------------
@pytest.fixture
def fake(clock):
    clock._now = T0  # the fixture's clock, set to a known start
    return FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=60))


def start(store, fake, clock, **spec):
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    job = jobs.submit(store, parse_spec({**SPEC, **spec}), clock.now())
    for _ in range(6):
        rec.run_pass()
        clock.advance(1)
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.RUNNING
    return rec, job, a


@pytest.mark.parametrize("reclaimed_after", [21.8, 90.0])
def test_a_reclaim_during_an_outage_is_billed_to_the_clouds_end_not_the_daemons_look(store, fake, clock,
                                                                                      reclaimed_after):
    rec, job, a = start(store, fake, clock)
    launched = a.launched_at.replace(tzinfo=UTC)
    clock._now = launched + timedelta(seconds=reclaimed_after)
    fake.inject_preemption(a.instance_id, 0)  # reclaimed without a notice; the daemon is down
    clock._now = launched + timedelta(seconds=142.5)  # it comes back
    rec.run_pass()
    first = attempts(store, job.id)[0]
    assert (first.status, first.reason) == (AttemptStatus.ENDED, TerminationReason.PREEMPTED)
    billed = (first.ended_at.replace(tzinfo=UTC) - launched).total_seconds()
    assert billed == pytest.approx(reclaimed_after)
    cost = attempt_cost(first, clock.now())
    assert cost == pytest.approx(SPOT * max(60.0, reclaimed_after) / 3600)  # or the minimum
    assert cost < SPOT * 142.5 / 3600


def test_after_an_outage_the_first_passs_budget_check_counts_the_clouds_end(store, fake, clock):
    """The job's cap is $0.10. Its first attempt, reclaimed 21.8 s after launch, cost its 60 s
    minimum ($0.02); a relaunch's worst case is $0.07 (runway 90 s + horizon 120 s at $1.2/h).
    Counted until the daemon's look 142.5 s after launch ($0.0475, plus a reservation), the
    relaunch would not fit and the job would end budget_exhausted; counted to the cloud's end,
    it relaunches in that same pass."""
    rec, job, a = start(store, fake, clock, budget={"max_cost": 0.10})
    launched = a.launched_at.replace(tzinfo=UTC)
    clock._now = launched + timedelta(seconds=21.8)
    fake.inject_preemption(a.instance_id, 0)
    clock._now = launched + timedelta(seconds=142.5)
    rec.run_pass()
    rows = attempts(store, job.id)
    with store.read() as s:
        j = s.get(Job, job.id)
    assert j.status in (JobStatus.STARTING, JobStatus.RECOVERING), (j.status, j.message)
    assert len(rows) == 2 and rows[1].status in (AttemptStatus.REQUESTED, AttemptStatus.LAUNCHED)


def test_a_finished_jobs_attempt_is_billed_to_the_clouds_end(store, fake, clock):
    """A job that finished with its instance still up (its terminate failed; the orphan sweep or
    the cloud ends it later): no pass views the job again, yet its attempt is billed to the
    cloud's end once the listing shows it."""
    rec, job, a = start(store, fake, clock)
    with store.write() as s:  # the job's last pass: ended, and the terminate call failed
        r, j = s.get(Attempt, a.id), s.get(Job, job.id)
        r.status, r.reason, r.ended_at = AttemptStatus.ENDED, TerminationReason.CANCELLED, clock.now()
        j.status, j.finished_at = JobStatus.CANCELLED, clock.now()
    clock.advance(100)
    fake.terminate(a.instance_id)  # ended 100 s later
    ended = fake.get(a.instance_id).ended_at
    clock.advance(3)
    rec.run_pass()
    [r] = attempts(store, job.id)
    assert r.ended_at.replace(tzinfo=UTC) == ended
    ran = (ended - r.launched_at.replace(tzinfo=UTC)).total_seconds()
    assert ran > 100 and attempt_cost(r, clock.now()) == pytest.approx(SPOT * ran / 3600)


def test_an_instance_made_for_an_attempt_closed_without_its_launch_record_is_billed():
    """A crash between the launch call and its record, then the attempt closed: the instance the
    cloud made (and the orphan sweep ended) is the attempt's cost all the same."""
    closed = row(status=AttemptStatus.ENDED, launched_at=None, ended_at=at(5))
    fixes = corrections(closed, inst(InstanceState.TERMINATED, at(1), at(40)), at(60))
    assert fixes == {"launched_at": at(1), "ended_at": at(40)}
    assert corrections(row(status=AttemptStatus.REQUESTED, launched_at=None), inst(created=at(1)), at(60)) == {}
