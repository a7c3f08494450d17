"""A sweep's deadline reaches its trials' live deadline policy: each trial's effective deadline
is the earlier of the sweep's and the template job's. Real SQLite store, FakeProvider, fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import yaml
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Event, JobStatus
from gpuorch.sweeps import intent
from gpuorch.sweeps.spec import load_sweep
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

JOB = {"run": "python train.py --lr {LR}", "resources": {"gpu": "A100:80GB:1"},
       "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"}}


def sweep_file(tmp_path, job, **fields):
    doc = {"name": "lr", "job": job, "parameters": {"LR": [0.1, 0.01]}, "max_parallel": 2, **fields}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def deadlines(trials, now) -> list[datetime | None]:
    return [t.deadline.resolve(now) if t.deadline else None for _, t in trials]


def test_the_earlier_of_the_sweeps_and_the_templates_deadline_stands(clock, tmp_path):
    now = clock.now()
    dl = {"at": "30d", "job_hours": 3, "startup": "5m"}
    _, trials = load_sweep(sweep_file(tmp_path, {**JOB, "deadline": dl}, deadline="20h"), now)
    assert deadlines(trials, now) == [now + timedelta(hours=20)] * 2
    assert all((t.deadline.job_hours, t.deadline.startup) == (3, 300) for _, t in trials)  # the template's work
    _, trials = load_sweep(sweep_file(tmp_path, {**JOB, "deadline": {**dl, "at": "10h"}}, deadline="20h"), now)
    assert deadlines(trials, now) == [now + timedelta(hours=10)] * 2
    _, trials = load_sweep(sweep_file(tmp_path, {**JOB, "deadline": {**dl, "at": "10h"}}), now)
    assert [t.deadline.at for _, t in trials] == ["10h", "10h"]  # no sweep deadline: the template's as written
    # a template without a deadline: the sweep's, where the work is known ...
    model = {"params": "1B", "method": "full", "tokens": "10M"}
    _, trials = load_sweep(sweep_file(tmp_path, {**JOB, "model": model, "resources": {}}, deadline="20h"), now)
    assert deadlines(trials, now) == [now + timedelta(hours=20)] * 2 and trials[0][1].deadline.job_hours is None
    # ... and none where it is not (the sweep still stops its trials at its deadline)
    _, trials = load_sweep(sweep_file(tmp_path, JOB, deadline="20h"), now)
    assert deadlines(trials, now) == [None, None]


def test_a_trials_live_policy_plans_for_the_sweeps_earlier_deadline(store, clock, tmp_path):
    """job_hours 2 with checkpoints every 10 min: the template's 30 days leave room for spot, the
    sweep's 2 h 20 min do not (a spot preemption could not be absorbed): the trials go on-demand
    from the start, and the decision names the sweep's deadline."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    dl = {"at": "30d", "job_hours": 2, "startup": "5m"}
    path = sweep_file(tmp_path, {**JOB, "deadline": dl}, deadline="140m")
    sweep = intent.submit(store, *load_sweep(path, clock.now()), clock.now())
    sweep_deadline = clock.now() + timedelta(minutes=140)
    rec.run_pass()
    with store.read() as s:
        trials = intent.trials_of(s, sweep.id)
        first = [jobs.attempts_of(s, t.id) for t in trials]
        events = [json.loads(e.data) for e in s.exec(select(Event).where(Event.kind == "deadline").order_by(Event.id))]
    assert all(JobSpec.model_validate_json(t.spec).deadline.resolve(t.created_at) == sweep_deadline for t in trials)
    assert [[a.spot for a in att] for att in first] == [[False], [False]]
    assert [e["decision"] for e in events] == ["on-demand", "on-demand"]
    assert {e["deadline"] for e in events} == {sweep_deadline.isoformat()}
    for _ in range(300):  # and they finish by it; the sweep's own stop at its deadline is not needed
        rec.run_pass()
        clock.advance(30)
    with store.read() as s:
        done = intent.trials_of(s, sweep.id)
    assert [t.status for t in done] == [JobStatus.SUCCEEDED] * 2
    assert all(t.finished_at <= sweep_deadline for t in done)
