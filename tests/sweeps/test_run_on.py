"""A capped sweep's trial near its end finishes on the money its stop would take (issue 35: no
trial ends while money that could still run it exists; gpuorch.money.finishing). Before, with
less left than its next horizon (2I + S) reserves, it was stopped a minute from its end and,
nothing else running, ended ``budget_exhausted`` with its whole spend wasted
(bench/sweep.py --small-cap seeds 11 and 20).

Bare Reconciler with the FakeProvider and a fake clock, as tests/sweeps/test_small_cap.py (a
night of trials in seconds). Each night runs twice: uncapped, to measure what the trials cost on
this fake, then under a cap of that and 50 s of the instance's price: less than the horizon a
look reserves (90 s here), more than the look after a trial's end needs.
"""

from __future__ import annotations

import logging

import pytest
import yaml

from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus
from gpuorch.sweeps import intent
from gpuorch.sweeps.spec import load_sweep
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, WarmCapableProvider
from tests.kit.sweeps import report, trials

STEP_S, STEPS = 6.0, 100  # 10 minutes of work, a checkpoint and a metrics line every 10 steps
PRICE = 1.20  # the fake's spot USD/h


def night(store, clock, tmp_path, name: str, objective: dict, seeds: list[int], cap: float | None) -> list:
    script = FakeJobScript(duration_s=STEPS * STEP_S, checkpoint_every_s=10 * STEP_S, final_checkpoint_s=5,
                           metrics=lambda p, env: {"step": int(round(p / STEP_S)), "loss": 1.0 / (1 + p)},
                           metrics_every_s=10 * STEP_S)
    fake = WarmCapableProvider(clock, boot_s=60, script=script)
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy())
    doc = {"name": name, "max_parallel": 1, "deadline": "4h", "objective": objective,
           "parameters": {"SEED": seeds},
           "job": {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                   "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}}
    if cap is not None:
        doc["budget"] = {"max_cost": cap}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    sweep = intent.submit(store, *load_sweep(tmp_path / f"{name}.yaml", clock.now()), clock.now())
    for _ in range(3000):
        rec.run_pass()
        if all(t.status.terminal for t in trials(store, sweep.id)):
            break
        clock.advance(10)
    for _ in range(40):  # the last instance's warm period ends
        if not fake.live_instances():
            break
        rec.run_pass()
        clock.advance(10)
    return [sweep.id, trials(store, sweep.id), fake]


@pytest.mark.parametrize("objective,seeds", [
    ({"metric": "loss", "mode": "min", "max_step": STEPS}, [0]),  # the last step named
    ({"metric": "loss", "mode": "min"}, [0, 1]),  # a plain sweep: the first trial's last step
])
def test_a_trial_whose_end_the_money_covers_finishes_rather_than_stopping(store, clock, tmp_path, objective, seeds,
                                                                          caplog):
    caplog.set_level(logging.INFO, logger="gpuorch.reconciler")
    sid, free, _ = night(store, clock, tmp_path, "free", objective, seeds, None)
    assert [t.status for t in free] == [JobStatus.SUCCEEDED] * len(seeds)
    cost = report(store, sid, clock)["spent"]
    cap = round(cost + 50 * PRICE / 3600, 4)
    sid, capped, fake = night(store, clock, tmp_path, "capped", objective, seeds, cap)
    statuses = [t.status for t in capped]
    assert statuses == [JobStatus.SUCCEEDED] * len(seeds), [(t.status, t.message) for t in capped]
    assert report(store, sid, clock)["spent"] <= cap + 1e-9
    assert all(a.reason is None or a.reason.value == "succeeded" for t in capped for a in attempts(store, t.id)
               if a.number > 0)  # one attempt each, never stopped
    assert fake.live_instances() == []
    assert any("runs on to its estimated end" in r.getMessage() for r in caplog.records)  # the log says why
