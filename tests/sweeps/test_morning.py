"""A sweep that survives the morning, through the real reconciler: raising the cap lets held and
queued trials go on; resuming a finished sweep restarts its unfinished trials from their
checkpoints. FakeProvider, real SQLite, fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from datetime import timedelta

from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus, SweepStatus
from gpuorch.sweeps import intent
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import report, submit, trials


def setup(store, clock, tmp_path, cap):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=900, checkpoint_every_s=60, final_checkpoint_s=5))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    # $1.2/h: a trial costs $0.30. A deadline that needs the trials at once: twice the 25 min that
    # $0.50 buys on one instance is past it (else the sweep runs them in turn, sweeps/plain.in_turn,
    # and none is held or ended)
    return fake, rec, submit(store, clock, tmp_path, max_parallel=3, budget={"max_cost": cap}, deadline="40m",
                             parameters={"LR": [0.003, 0.001, 0.0003]})


def test_resume_restarts_unfinished_trials_from_their_checkpoints(store, clock, tmp_path):
    fake, rec, sweep = setup(store, clock, tmp_path, cap=0.50)
    for _ in range(400):
        rec.run_pass()
        clock.advance(7)
    r = report(store, sweep.id, clock)
    assert r["status"] == SweepStatus.DONE.value and r["spent"] <= 0.50 + 1e-9
    left = [t for t in trials(store, sweep.id) if t.status != JobStatus.SUCCEEDED]
    assert left and all(t.status == JobStatus.BUDGET_EXHAUSTED for t in left)
    before = {t.id: attempts(store, t.id)[-1].last_checkpoint for t in left}
    _, hit = intent.resume(store, "lr", clock.now(), budget=1.2, deadline=clock.now() + timedelta(minutes=40))
    assert hit == len(left)
    for _ in range(300):
        rec.run_pass()
        clock.advance(7)
    assert [t.status for t in trials(store, sweep.id)] == [JobStatus.SUCCEEDED] * 3
    for tid, ckpt in before.items():
        resumed = [a for a in attempts(store, tid) if a.resumed_from == ckpt]
        assert ckpt is not None and resumed, f"trial {tid} started over"
    r = report(store, sweep.id, clock)
    assert r["spent"] <= 1.2 + 1e-9 and r["status"] == SweepStatus.DONE.value
    assert fake.live_instances() == []


def test_raising_the_cap_lets_held_and_queued_trials_go_on(store, clock, tmp_path):
    fake, rec, sweep = setup(store, clock, tmp_path, cap=0.50)
    raised = False
    for _ in range(500):
        rec.run_pass()
        if not raised and any(t.status == JobStatus.HELD for t in trials(store, sweep.id)):
            intent.update(store, "lr", clock.now(), budget=1.2)
            raised = True
        clock.advance(7)
    assert raised, "no trial was held"
    assert [t.status for t in trials(store, sweep.id)] == [JobStatus.SUCCEEDED] * 3
    assert report(store, sweep.id, clock)["spent"] <= 1.2 + 1e-9
