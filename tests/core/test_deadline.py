"""A job with a deadline, run by the reconciler with the FakeProvider, a real SQLite store and a
fake clock: the live policy (gpuorch.policy.live) chooses spot, waiting and on-demand.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import json
from datetime import timedelta

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.service import JobService
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.decide.deadline import PROBE_MAX_S
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, events, job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

ZONES = ("r1-a", "r1-b", "r2-a")


def spec(deadline: str, **over):
    return parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
                       "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"},
                       "deadline": {"at": deadline, "job_hours": 2, "startup": "5m"}, **over})


def run_until(rec, fake, clock, store, job_id, hours, step=60.0, each=None):
    """Passes every ``step`` s until the job is over (or ``hours`` pass); never two live instances."""
    end = clock.now() + timedelta(hours=hours)
    while clock.now() < end and not job_row(store, job_id).status.terminal:
        rec.run_pass()
        assert len(fake.live_instances()) <= 2  # one attempt, plus one draining its final checkpoint
        if each is not None:
            each(clock.now())
        clock.advance(step)
    rec.run_pass()


def test_deadline_met_through_a_preemption_and_no_spot_capacity(store, clock):
    """Spot first; preempted after 30 min with every spot market then out of capacity: the job
    waits while its slack is above the reserve, then runs on on-demand and finishes in time."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, backoff_s=300)
    job = jobs.submit(store, spec("4h"), clock.now())
    deadline = clock.now() + timedelta(hours=4)
    waiting_seen = []

    def script(now):
        a = attempts(store, job.id)
        if len(a) == 1 and a[0].status == AttemptStatus.RUNNING and now - a[0].started_at >= timedelta(minutes=30):
            for z in ZONES:
                fake.set_capacity(z, "gpu.a100", True, False)
            fake.inject_preemption(a[0].instance_id, notice_s=120)
        j = job_row(store, job.id)
        if j.status == JobStatus.QUEUED and (j.message or "").startswith("deadline policy: waits for spot"):
            waiting_seen.append(now)

    run_until(rec, fake, clock, store, job.id, hours=5, each=script)

    j, tried = job_row(store, job.id), attempts(store, job.id)
    assert j.status == JobStatus.SUCCEEDED and j.finished_at <= deadline
    first, last = tried[0], tried[-1]
    assert first.spot and first.reason == TerminationReason.PREEMPTED
    assert not last.spot and last.reason == TerminationReason.SUCCEEDED and last.resumed_from is not None
    assert all(a.spot and a.reason == TerminationReason.NO_CAPACITY for a in tried[1:-1])
    assert waiting_seen, "it waited for spot while it had slack"
    # ... but not for long: on-demand started once the slack came down to the reserve
    assert last.requested_at - first.ended_at > timedelta(minutes=10)
    # Each time the spot markets' back-off ends it tries spot again, finds no capacity and waits;
    # a wait is recorded once, not at every one-minute recheck.
    decisions = [json.loads(e.data)["decision"] for e in events(store, "deadline", job.id)]
    rounds = (len(decisions) - 2) // 2
    assert rounds >= 1 and decisions == ["spot"] + ["spot", "wait"] * rounds + ["on-demand"]
    waits = [e for e in events(store, "deadline", job.id) if json.loads(e.data)["decision"] == "wait"]
    assert "slack" in waits[0].message and "reserve" in waits[0].message
    assert len(waits) * 3 < (last.requested_at - first.ended_at).total_seconds() / 60


def test_without_a_deadline_the_same_job_never_waits(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60))
    for z in ZONES:
        fake.set_capacity(z, "gpu.a100", True, False)
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    plain = spec("4h").model_copy(update={"deadline": None})
    job = jobs.submit(store, plain, clock.now())
    rec.run_pass()
    rec.run_pass()
    assert any(not a.spot and a.status != AttemptStatus.ENDED for a in attempts(store, job.id))
    assert events(store, "deadline", job.id) == []


def test_a_spot_attempt_that_would_risk_the_deadline_moves_to_on_demand_at_a_checkpoint(store, clock, tmp_path):
    """The job checkpoints only every 45 min of work: with 40 min of slack, staying on spot soon
    risks more than a preemption could be recovered from. The daemon stops it cleanly (a final
    checkpoint) and the on-demand replacement resumes from it, in time."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=2700))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    job = jobs.submit(store, spec("160m"), clock.now())
    deadline = clock.now() + timedelta(minutes=160)
    run_until(rec, fake, clock, store, job.id, hours=3)

    j, tried = job_row(store, job.id), attempts(store, job.id)
    assert j.status == JobStatus.SUCCEEDED and j.finished_at <= deadline
    assert [a.spot for a in tried] == [True, False]
    moved, od = tried
    assert moved.reason == TerminationReason.MOVED and moved.message.startswith("deadline policy moves to on-demand")
    assert ("runner.request_stop", moved.instance_id) in fake.calls  # a clean stop, not a kill
    assert od.resumed_from == moved.last_checkpoint and moved.last_checkpoint.endswith("-a1")
    assert od.predecessor == moved.number
    assert j.preemptions == 0 and j.failures == 0  # a move spends no retry budget
    decisions = [json.loads(e.data)["decision"] for e in events(store, "deadline", job.id)]
    assert decisions == ["spot", "move", "on-demand"]
    # `status JOB` and `events JOB` name the move (the sqlite3 read path included)
    svc = JobService(None, tmp_path, clock.now, url=store.url)
    assert [a["reason"] for a in svc.job(str(job.id))["attempt_list"]] == ["moved", "succeeded"]
    ended = [e["message"] for e in svc.events(str(job.id)) if e["kind"] == "attempt_ended"]
    assert ended[0].startswith("moved: deadline policy moves to on-demand")


def _no_spot_anywhere(fake, available=False):
    for z in ZONES:
        fake.set_capacity(z, "gpu.a100", True, available)


def test_a_long_wait_for_spot_probes_less_and_less_often(store, clock):
    """No spot capacity anywhere for the whole wait (12 h deadline, 2 h of work): each probe of
    a market is a failed attempt row, so they come further and further apart (at most every
    PROBE_MAX_S) instead of at every 5 min back-off; the job still turns to on-demand when its
    slack comes down to the reserve, and finishes in time."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=600))
    _no_spot_anywhere(fake)
    rec = Reconciler(store, {"fake": fake}, clock=clock, backoff_s=300)
    job = jobs.submit(store, spec("12h"), clock.now())
    start, deadline = clock.now(), clock.now() + timedelta(hours=12)
    run_until(rec, fake, clock, store, job.id, hours=13)

    j, tried = job_row(store, job.id), attempts(store, job.id)
    assert j.status == JobStatus.SUCCEEDED and j.finished_at <= deadline
    probes = [a for a in tried if a.reason == TerminationReason.NO_CAPACITY]
    od = tried[-1]
    assert not od.spot and all(a.spot for a in tried[:-1]) and len(probes) == len(tried) - 1
    waited_h = (od.requested_at - start).total_seconds() / 3600
    assert waited_h > 3  # it did wait for spot a long time (the reserve is the same as before)
    rounds = sorted({a.requested_at for a in probes})
    assert len(probes) == 3 * len(rounds)  # each round tries every spot market once
    gaps = [(b - a).total_seconds() for a, b in zip(rounds, rounds[1:], strict=False)]
    assert gaps == sorted(gaps) and gaps[0] >= 300  # never more often than the back-off, then rarer
    assert max(gaps) <= PROBE_MAX_S + 60  # capped (plus the one-minute recheck)
    # a round at every 5 min back-off would be 36 rows an hour; it is under a third of that
    assert len(probes) < 36 * waited_h / 3


def test_spot_capacity_that_comes_back_during_a_long_wait_is_found(store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=600))
    _no_spot_anywhere(fake)
    rec = Reconciler(store, {"fake": fake}, clock=clock, backoff_s=300)
    job = jobs.submit(store, spec("12h"), clock.now())
    back = clock.now() + timedelta(hours=2)

    def script(now):
        if now >= back:
            _no_spot_anywhere(fake, available=True)

    run_until(rec, fake, clock, store, job.id, hours=13, each=script)
    j, tried = job_row(store, job.id), attempts(store, job.id)
    assert j.status == JobStatus.SUCCEEDED
    got = next(a for a in tried if a.launched_at is not None)
    assert got.spot and back <= got.requested_at <= back + timedelta(seconds=PROBE_MAX_S + 120)


def test_a_moved_job_stays_bound_for_on_demand_after_a_launch_that_found_no_capacity(clock):
    """Moved off spot, then the on-demand launch found no capacity: the next launch is still
    on-demand (the policy must not take the failed launch for a fresh start and pick spot)."""
    from gpuorch.placement import candidates
    from gpuorch.reconciler.decide.deadline import situation
    from gpuorch.reconciler.decide.job import AttemptView, JobView, Settings
    from gpuorch.testing.fake_provider import default_offers

    s = spec("4h")
    job = Job(id=1, name="train", spec=s.model_dump_json(), status=JobStatus.QUEUED, created_at=clock.now())

    def row(n, spot, reason):
        return AttemptView(Attempt(job_id=1, number=n, status=AttemptStatus.ENDED, reason=reason, provider="fake",
                                   region="r1", zone="r1-a", instance_type="gpu.a100", spot=spot,
                                   requested_at=clock.now(), started_at=clock.now() if n == 1 else None,
                                   ended_at=clock.now()), observed=True)

    ranked = candidates(s, default_offers())
    moved = [row(1, True, TerminationReason.MOVED)]
    then_refused = moved + [row(2, False, TerminationReason.NO_CAPACITY)]
    preempted_after = then_refused + [row(3, False, TerminationReason.PREEMPTED)]
    assert situation(JobView(job, s, moved), ranked, clock.now(), Settings())[0].moved
    assert situation(JobView(job, s, then_refused), ranked, clock.now(), Settings())[0].moved
    assert not situation(JobView(job, s, preempted_after), ranked, clock.now(), Settings())[0].moved
