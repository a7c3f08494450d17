"""A launched attempt whose agent has not answered yet is not decided again every pass (issue 18:
a queue drain's launched jobs were, until their agents answered): once its agent start went
through, nothing it is decided from changes but the clock, and only the boot timeout reads that.
The memo ends at the boot timeout (the attempt is ended as lost) and when the agent answers.

Real SQLite, FakeProvider whose runner's start launches no agent (as the sim's ``external``
agents), a fake clock; decide's calls counted.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import gpuorch.reconciler.reconciler as reconciler_module
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, job_status
from gpuorch.testing.fake_job import FakeRunner
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def test_a_booting_attempt_is_decided_again_only_at_its_boot_timeout(store, clock, monkeypatch):
    def start(self, config, workdir=None):  # type: ignore[no-untyped-def]
        self.provider._record("runner.start", self.instance_id, config.attempt)  # no agent: it never answers

    monkeypatch.setattr(FakeRunner, "start", start)
    calls: list[int] = []
    real_decide = reconciler_module.decide
    monkeypatch.setattr(reconciler_module, "decide", lambda view, *a, **k: calls.append(view.job.id) or real_decide(
        view, *a, **k))
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(boot_timeout_s=60), owner="d1")
    ids = [jobs.submit(store, parse_spec({**SPEC, "name": f"j{i}"}), clock.now()).id for i in range(3)]
    for _ in range(3):  # launch; start the agents; decide once more and remember
        rec.run_pass()
        clock.advance(2)
    assert fake.count("runner.start") == 3
    calls.clear()
    for _ in range(5):
        rec.run_pass()
        clock.advance(2)
        assert rec.steady.skipped == 3
    assert calls == []  # not decided again
    assert fake.count("runner.start") == 3 and fake.count("runner.heartbeat") == 0  # no start again, no heartbeat
    assert {a.status for i in ids for a in attempts(store, i)} == {AttemptStatus.LAUNCHED}
    clock.advance(60)  # past the boot timeout: decided again, and ended as lost
    rec.run_pass()
    assert sorted(calls) == ids and rec.steady.skipped == 0
    first = [a for i in ids for a in attempts(store, i) if a.number == 1]
    assert {(a.status, a.reason) for a in first} == {(AttemptStatus.ENDED, TerminationReason.LOST)}


def test_a_booting_attempt_whose_agent_answers_is_decided_at_once(store, clock, monkeypatch):
    silent = {"agents": True}
    real_status = FakeRunner.status

    def status(self):  # type: ignore[no-untyped-def]
        return None if silent["agents"] else real_status(self)

    monkeypatch.setattr(FakeRunner, "status", status)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=10 * 3600, checkpoint_every_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(boot_timeout_s=600), owner="d1")
    job_id = jobs.submit(store, parse_spec({**SPEC, "name": "j"}), clock.now()).id
    for _ in range(4):
        rec.run_pass()
        clock.advance(2)
    assert rec.steady.skipped == 1 and job_status(store, job_id) == JobStatus.STARTING
    silent["agents"] = False  # the agent answers: a new status object, so decide runs
    rec.run_pass()
    assert rec.steady.skipped == 0 and job_status(store, job_id) == JobStatus.RUNNING
