"""A job with a deadline, run by the reconciler with the FakeProvider, a real SQLite store and a
fake clock: the live policy (gpuorch.policy.live) chooses spot, waiting and on-demand."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlmodel import select

from gpuorch import jobs
from gpuorch.fake import FakeJobScript, FakeProvider
from gpuorch.jobservice import JobService
from gpuorch.reconciler import Reconciler
from gpuorch.spec import parse_spec
from gpuorch.store.models import Attempt, AttemptStatus, Event, Job, JobStatus, TerminationReason

ZONES = ("r1-a", "r1-b", "r2-a")


def spec(deadline: str, **over):
    return parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
                       "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"},
                       "deadline": {"at": deadline, "job_hours": 2, "startup": "5m"}, **over})


def attempts(store, job_id) -> list[Attempt]:
    with store.read() as s:
        return jobs.attempts_of(s, job_id)


def job_row(store, job_id) -> Job:
    with store.read() as s:
        return s.get(Job, job_id)


def policy_events(store, job_id) -> list[Event]:
    with store.read() as s:
        return list(s.exec(select(Event).where(Event.job_id == job_id, Event.kind == "deadline").order_by(Event.id)))


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
    decisions = [json.loads(e.data)["decision"] for e in policy_events(store, job.id)]
    rounds = (len(decisions) - 2) // 2
    assert rounds >= 1 and decisions == ["spot"] + ["spot", "wait"] * rounds + ["on-demand"]
    waits = [e for e in policy_events(store, job.id) if json.loads(e.data)["decision"] == "wait"]
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
    assert policy_events(store, job.id) == []


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
    decisions = [json.loads(e.data)["decision"] for e in policy_events(store, job.id)]
    assert decisions == ["spot", "move", "on-demand"]
    # `status JOB` and `events JOB` name the move (the sqlite3 read path included)
    svc = JobService(None, tmp_path, clock.now, url=store.url)
    assert [a["reason"] for a in svc.job(str(job.id))["attempt_list"]] == ["moved", "succeeded"]
    ended = [e["message"] for e in svc.events(str(job.id)) if e["kind"] == "attempt_ended"]
    assert ended[0].startswith("moved: deadline policy moves to on-demand")
