"""Early stopping through the real reconciler: ASHA and the median stopping rule end bad trials
``pruned`` (a clean stop, their checkpoint kept) and let good ones finish. Plus the pure verdicts.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.sweeps.pruning import TrialHistory, extend_history, parse_history, verdict
from gpuorch.testing.e2e import attempts, clock_passes
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import loss, report, submit, trials


def fake(clock):
    return FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60, metrics=loss,
                                                    metrics_every_s=50))


def test_asha_prunes_the_trials_behind_at_a_rung_and_keeps_their_checkpoints(store, clock, tmp_path):
    f = fake(clock)
    rec = Reconciler(store, {"fake": f}, clock=clock)
    sweep = submit(store, clock, tmp_path, pruning={"rule": "asha", "min_steps": 100})
    clock_passes(rec, clock, 250, 7)
    best, *rest = trials(store, sweep.id)  # lr-0 has the best LR and reaches each rung first
    assert best.status == JobStatus.SUCCEEDED
    assert [t.status for t in rest] == [JobStatus.PRUNED] * 3
    for t in rest:
        [a] = attempts(store, t.id)
        assert a.reason == TerminationReason.PRUNED and a.last_checkpoint is not None  # stopped cleanly
        assert "successive halving" in t.message and a.ended_at is not None
        assert (a.ended_at - a.launched_at).total_seconds() < 300  # stopped early, not run to the end
    r = report(store, sweep.id, clock)
    assert r["counts"] == {"succeeded": 1, "pruned": 3} and r["spend"]["wasted"] == 0
    assert r["spend"]["pruned"] > 0 and f.live_instances() == []


def test_median_rule_prunes_against_finished_trials(store, clock, tmp_path):
    rec = Reconciler(store, {"fake": fake(clock)}, clock=clock)
    sweep = submit(store, clock, tmp_path, max_parallel=1, pruning={"rule": "median"})
    clock_passes(rec, clock, 400, 7)
    statuses = [t.status for t in trials(store, sweep.id)]
    assert statuses == [JobStatus.SUCCEEDED, JobStatus.PRUNED, JobStatus.PRUNED, JobStatus.PRUNED]
    assert "median stopping rule at step 50" in trials(store, sweep.id)[1].message  # at its first report


def test_no_pruning_rule_no_pruning(store, clock, tmp_path):
    rec = Reconciler(store, {"fake": fake(clock)}, clock=clock)
    sweep = submit(store, clock, tmp_path)
    clock_passes(rec, clock, 250, 7)
    assert [t.status for t in trials(store, sweep.id)] == [JobStatus.SUCCEEDED] * 4


def test_verdicts_and_histories():
    def h(i, state, base, t0, upto=700):
        return TrialHistory(i, state, tuple((s, base + 1 / (1 + s / 50), t0 + s) for s in range(50, upto + 1, 50)))

    first, behind, ahead = h(1, "running", 0.0, 0, 150), h(2, "running", 0.1, 10, 150), h(3, "running", -0.1, 20, 100)
    assert verdict("asha", "min", behind, [first, ahead]) is not None
    assert verdict("asha", "min", ahead, [first, behind]) is None
    assert verdict("asha", "min", first, [behind, ahead]) is None  # promoted when it reached the rung alone
    assert verdict("asha", "max", ahead, [first, behind]) is not None  # maximising, the lowest falls behind
    done = h(4, "finished", 0.0, -1000)
    assert verdict("median", "min", behind, [done]) is not None
    assert verdict("median", "min", ahead, [done]) is None
    assert verdict("median", "min", behind, [first]) is None  # nothing finished yet: no decision
    assert verdict("median", "min", TrialHistory(5, "running", ()), [done]) is None  # nothing reported
    text = extend_history(None, [(50, 0.9), (100, 0.8)], at=10.0)
    assert parse_history(text) == ((50, 0.9, 10.0), (100, 0.8, 10.0))
    again = extend_history(text, [(100, 0.7), (150, 0.6)], at=20.0)  # a resumed trial reports 100 again
    assert parse_history(again) == ((50, 0.9, 10.0), (100, 0.8, 10.0), (150, 0.6, 20.0))
    assert extend_history(again, [(150, 0.5)], at=30.0) is None
