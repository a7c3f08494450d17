"""Lost work per attempt (the work between the last durable checkpoint and the kill), exact on a
fake clock, with and without a notice, and shown by `gpuorch status JOB` and `gpuorch events`.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.store import Store, default_url
from gpuorch.store.models import AttemptStatus, TerminationReason
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"name": "train", "run": "x", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
        "checkpoint": {"store": "file:///tmp/ckpt"}}


@pytest.fixture
def cli_store():
    """The store the CLI reads ($GPUORCH_HOME/state.db)."""
    s = Store(default_url())
    yield s
    s.close()


@pytest.fixture
def world(cli_store, clock):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3000, checkpoint_every_s=60, final_checkpoint_s=5))
    rec = Reconciler(cli_store, {"fake": fake}, clock=clock)
    job = jobs.submit(cli_store, parse_spec(SPEC), clock.now())
    rec.run_pass()  # launch
    clock.advance(1)
    rec.run_pass()  # start the agent: the job's work starts now
    return fake, rec, job


def work_until(rec, clock, seconds: float, step: float = 5.0) -> None:
    """Passes every ``step`` seconds for ``seconds`` (the first one now)."""
    t = 0.0
    while t < seconds:
        rec.run_pass()
        dt = min(step, seconds - t)
        clock.advance(dt)
        t += dt


def test_without_notice_lost_work_runs_from_the_last_checkpoint_to_the_kill(world, cli_store, clock):
    fake, rec, job = world
    work_until(rec, clock, 150)  # checkpoints at 60 and 120 s of work
    [a1] = attempts(cli_store, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=0)  # reclaimed now, no warning
    clock.advance(20)  # the daemon looks 20 s later: the kill time counts, not when it noticed
    rec.run_pass()
    a1 = attempts(cli_store, job.id)[0]
    assert a1.reason == TerminationReason.PREEMPTED and "without notice" in a1.message
    assert a1.lost_work_s == pytest.approx(30)


def test_with_notice_and_a_prompt_daemon_nothing_is_lost(world, cli_store, clock):
    fake, rec, job = world
    work_until(rec, clock, 150)
    [a1] = attempts(cli_store, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=120)
    rec.run_pass()  # drains attempt 1, requests attempt 2
    clock.advance(5)  # the final checkpoint is durable now
    rec.run_pass()  # terminates attempt 1 at once
    a1 = attempts(cli_store, job.id)[0]
    assert a1.status == AttemptStatus.ENDED and a1.reason == TerminationReason.PREEMPTED
    assert a1.lost_work_s == pytest.approx(0)


def test_with_notice_but_the_daemon_away_the_work_after_the_final_checkpoint_is_lost(world, cli_store, clock):
    fake, rec, job = world
    work_until(rec, clock, 150)
    [a1] = attempts(cli_store, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=120)
    clock.advance(200)  # the daemon sleeps through the notice and the kill
    rec.run_pass()
    a1 = attempts(cli_store, job.id)[0]
    assert a1.reason == TerminationReason.PREEMPTED and "notice the daemon missed" in a1.message
    # The job kept training after its final checkpoint (5 s after the notice) until the kill.
    assert a1.lost_work_s == pytest.approx(115)


def test_a_resumed_attempt_counts_from_its_own_start_not_the_restored_checkpoint(world, cli_store, clock):
    fake, rec, job = world
    work_until(rec, clock, 150)
    fake.inject_preemption(attempts(cli_store, job.id)[0].instance_id, notice_s=0)
    work_until(rec, clock, 30)  # attempt 2 launched and started, from the checkpoint at 120 s
    a2 = attempts(cli_store, job.id)[-1]
    assert a2.status == AttemptStatus.RUNNING and a2.resumed_from is not None
    work_until(rec, clock, 20)
    fake.inject_preemption(a2.instance_id, notice_s=0)  # before its first checkpoint of its own (60 s)
    rec.run_pass()
    a2 = attempts(cli_store, job.id)[1]
    started = fake._agent_of(job.id, a2.number).resume_time()
    assert a2.lost_work_s == pytest.approx((a2.ended_at - started).total_seconds())
    assert 20 <= a2.lost_work_s < 60


def test_status_and_events_show_lost_work(world, cli_store, clock):
    fake, rec, job = world
    work_until(rec, clock, 150)
    fake.inject_preemption(attempts(cli_store, job.id)[0].instance_id, notice_s=0)
    rec.run_pass()
    runner = CliRunner()
    detail = json.loads(runner.invoke(app, ["status", str(job.id), "--json"]).output)
    assert detail["attempt_list"][0]["lost_work_s"] == pytest.approx(30)
    assert detail["lost_work_s"] == pytest.approx(30)
    table = runner.invoke(app, ["status", str(job.id)], env={"COLUMNS": "250"}).output
    assert "lost work 30s" in table
    assert re.search(r"LOST WORK.*\n(.*\n)*1 .* 30s ", table), table  # the preempted attempt's row
    text = runner.invoke(app, ["events", str(job.id)]).output
    assert "attempt_ended" in text and "lost work 30s" in text
    [ended] = [e for e in json.loads(runner.invoke(app, ["events", str(job.id), "--json"]).output)
               if e["kind"] == "attempt_ended"]
    assert ended["data"] == {"reason": "preempted", "lost_work_s": pytest.approx(30)}
