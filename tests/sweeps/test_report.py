"""The morning table: best among finished trials (or flagged unfinished with its step), ranking by
the result file's value, per-trial runtime/attempts/preemptions, and the spend split by use.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import pytest

from gpuorch.reconciler import Reconciler
from gpuorch.sweeps import intent
from gpuorch.testing.e2e import attempts, clock_passes
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import loss, report, submit, trials


def test_best_is_a_finished_trial_and_the_footer_splits_the_spend(store, clock, tmp_path):
    script = FakeJobScript(duration_s=300, metrics=loss, metrics_every_s=50)
    fake = FakeProvider(clock, script=script)
    fake.scripts["lr-0"] = FakeJobScript(duration_s=5000, metrics=loss, metrics_every_s=50)  # the best LR, slow
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path)  # LR 0.003 (lr-0), 0.001, 0.0003, 0.1; two at a time
    clock_passes(rec, clock, 40, 10)  # lr-0 is at step ~400, lr-1 finished, others running or queued
    r = report(store, sweep.id, clock)
    assert r["trials"][0]["name"] == "lr-1" and r["best"]["name"] == "lr-1" and not r["best"]["unfinished"]
    assert any(t["name"] == "lr-0" and t["status"] == "running" for t in r["trials"])  # lower loss, not best
    clock_passes(rec, clock, 60, 10)
    intent.cancel(store, "lr", clock.now())
    clock_passes(rec, clock, 3, 10)
    r = report(store, sweep.id, clock)
    by = {t["name"]: t for t in r["trials"]}
    assert [t["status"] for t in r["trials"]][:3] == ["succeeded"] * 3 and by["lr-0"]["status"] == "cancelled"
    assert r["best"]["name"] == "lr-1"  # lr-0's loss is lower, but it never finished
    assert by["lr-1"]["attempts"] == 1 and by["lr-1"]["preemptions"] == 0
    assert by["lr-1"]["runtime_s"] == pytest.approx(300, abs=20)
    # the footer: finished trials' spend, and lr-0's attempt was stopped with no use: wasted
    sp = r["spend"]
    assert sum(sp.values()) == pytest.approx(r["spent"])
    assert sp["finished"] == pytest.approx(sum(by[n]["cost"] for n in ("lr-1", "lr-2", "lr-3")), abs=1e-5)
    assert sp["wasted"] == pytest.approx(by["lr-0"]["cost"], abs=1e-5) and sp["wasted"] > 0
    assert r["wasted_share"] == pytest.approx(sp["wasted"] / r["spent"], abs=1e-4)


def test_without_a_finished_trial_the_best_is_flagged_unfinished_with_its_step(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=5000, metrics=loss, metrics_every_s=50))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path)
    clock_passes(rec, clock, 30, 10)
    best = report(store, sweep.id, clock)["best"]
    assert best["name"] == "lr-0" and best["unfinished"] and best["step"] >= 200


def test_rank_by_the_result_file(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=100))  # its result: {"progress": duration}
    for i, d in enumerate((120, 300, 200, 150)):
        fake.scripts[f"lr-{i}"] = FakeJobScript(duration_s=d, metrics=loss, metrics_every_s=50)
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    sweep = submit(store, clock, tmp_path, objective={"metric": "progress", "mode": "max", "source": "result"})
    clock_passes(rec, clock, 60, 10)
    r = report(store, sweep.id, clock)
    assert [t["name"] for t in r["trials"]] == ["lr-1", "lr-2", "lr-3", "lr-0"]  # by the result's value
    assert r["best"]["value"] == 300 and r["objective"]["source"] == "result"
    assert all(len(attempts(store, t.id)) == 1 for t in trials(store, sweep.id))
