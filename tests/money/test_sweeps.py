"""Sweep scheduling with the FakeProvider, a real SQLite store and a fake clock: max_parallel,
parameters reaching the trials, metrics, the objective order, the deadline, the cap, cancel.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import AttemptStatus, Checkpoint, JobStatus, SweepStatus, TerminationReason
from gpuorch.sweeps import intent
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import loss, report, submit, trials

LRS = {"LR": [0.1, 0.03, 0.003, 0.0003]}  # the order trials run in; the report orders them by loss


def test_trials_run_max_parallel_at_a_time_and_report_best_first(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=300, metrics=loss, metrics_every_s=50))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path, parameters=LRS)
    most = 0
    for _ in range(150):
        rec.run_pass()
        most = max(most, len(fake.live_instances()))
        clock.advance(10)
    assert most == 2  # never more than max_parallel at once, and the slots were used
    ts = trials(store, sweep.id)
    assert [t.status for t in ts] == [JobStatus.SUCCEEDED] * 4
    spec = JobSpec.model_validate_json(ts[1].spec)
    assert spec.env["LR"] == "0.03" and spec.run == 'python train.py --lr "${LR}"'  # env, and {LR} refers to it
    assert [a.config.env["LR"] for a in fake._agents.values()] == ["0.1", "0.03", "0.003", "0.0003"]

    r = report(store, sweep.id, clock)
    assert [t["params"]["LR"] for t in r["trials"]] == [0.003, 0.03, 0.0003, 0.1]  # by final loss, lowest first
    assert r["best"]["metrics"] == {"step": 300, "loss": 0.25}  # the last line the job wrote
    assert r["status"] == "done" and r["counts"] == {"succeeded": 4}
    assert r["spent"] == pytest.approx(sum(t["cost"] for t in r["trials"]), abs=1e-5) and r["spent"] > 0


def test_deadline_stops_running_trials_cleanly_and_starts_no_more(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    sweep = submit(store, clock, tmp_path, parameters=LRS, max_parallel=1, deadline="15m")
    for _ in range(150):
        rec.run_pass()
        clock.advance(7)
    first, second, third, fourth = trials(store, sweep.id)
    assert first.status == JobStatus.SUCCEEDED
    assert second.status == JobStatus.CANCELLED and "stopped cleanly at the sweep deadline" in second.message
    with store.read() as s:
        [a] = jobs.attempts_of(s, second.id)
        final = s.exec(select(Checkpoint).where(Checkpoint.job_id == second.id, Checkpoint.final == True)).one()  # noqa: E712
    assert (a.status, a.reason) == (AttemptStatus.ENDED, TerminationReason.CANCELLED)
    assert a.last_checkpoint == final.name  # its work is saved
    for t in (third, fourth):
        assert t.status == JobStatus.CANCELLED and "not started by the sweep deadline" in t.message
    assert report(store, sweep.id, clock)["status"] == SweepStatus.DONE.value
    assert fake.live_instances() == []


def test_sweep_cap_stops_the_newest_trial_first(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    sweep = submit(store, clock, tmp_path, parameters=LRS, max_parallel=3, budget={"max_cost": 0.30})
    for _ in range(100):
        rec.run_pass()
        clock.advance(7)
    ts = trials(store, sweep.id)
    stopped = [t for t in ts if t.status == JobStatus.BUDGET_EXHAUSTED]
    with store.read() as s:
        ends = {t.id: max((a.ended_at for a in jobs.attempts_of(s, t.id) if a.ended_at), default=None) for t in ts}
    order = sorted((ends[t.id], t.id) for t in stopped if ends[t.id])
    assert [tid for _, tid in order] == sorted((t.id for t in stopped if ends[t.id]), reverse=True)  # newest first
    assert report(store, sweep.id, clock)["spent"] <= 0.30


def test_cancel_stops_running_trials_and_queued_ones(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path, parameters=LRS)
    for _ in range(5):
        rec.run_pass()
        clock.advance(10)
    assert len(fake.live_instances()) == 2
    swept, hit = intent.cancel(store, "lr", clock.now())
    assert (swept.status, hit) == (SweepStatus.CANCELLED, 4)
    rec.run_pass()
    assert [t.status for t in trials(store, sweep.id)] == [JobStatus.CANCELLED] * 4
    assert fake.live_instances() == []
    assert json.loads(json.dumps(report(store, sweep.id, clock), default=str))["status"] == "cancelled"
