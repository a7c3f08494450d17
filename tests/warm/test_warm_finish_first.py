"""Finish first counts a sweep's warm capacity (issue 35): a trial the money can finish on the
instance a finished trial left warm, but not on a new one (its boot), waits for that instance while
it is made ready and runs there; the warm sweep keeps the instance for it instead of releasing it
as unwanted. Before, the trial waited for money it would never have, and the instance was released.

Bare Reconciler: the warm-capable FakeProvider and a fake clock (which the providers' entry points
cannot build) make a trial's cost exact enough to put the cap between a warm and a cold start.
"""

from __future__ import annotations

from sqlmodel import select

from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, JobStatus, WarmInstance
from gpuorch.testing.fake_provider import FakeJobScript, WarmCapableProvider
from tests.kit.sweeps import loss, report, submit, trials

BOOT_S, WORK_S, PRICE = 120, 600, 4.0  # the fake's A100 on-demand, USD/h; a step a second of work


def test_a_trial_the_cap_funds_only_without_a_boot_runs_on_the_instance_its_predecessor_left_warm(store, clock,
                                                                                                   tmp_path):
    fake = WarmCapableProvider(clock, boot_s=BOOT_S, script=FakeJobScript(
        duration_s=WORK_S, checkpoint_every_s=60, metrics=loss, metrics_every_s=30))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    # a cold trial costs about (120 + 600 + 15) s, and the caps keep a horizon (90 s: two 30 s decision
    # intervals and a 30 s stop) reserved to its end; the cap (1,440 s of the price): the first, then a
    # second's 600 s of work and its horizon (about 1,425 s), but not a second boot (1,455 s without
    # the horizon: a cold start was refused even before the horizon was counted)
    cap = round(1440 * PRICE / 3600, 4)
    # on-demand: no preemption to keep a start in reserve for (finish._cushion)
    job = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "keep_warm": "5m",
           "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}
    sweep = submit(store, clock, tmp_path, job=job, max_parallel=1, budget={"max_cost": cap},
                   parameters={"LR": [0.003, 0.001]}, objective={"metric": "loss", "mode": "min", "max_step": WORK_S})
    waited = []
    for _ in range(400):
        rec.run_pass()
        ts = trials(store, sweep.id)
        waited += [t.message for t in ts if t.status == JobStatus.QUEUED and "kept warm" in (t.message or "")]
        if all(t.status.terminal for t in ts):
            break
        clock.advance(7)
    first, second = trials(store, sweep.id)
    assert first.status == second.status == JobStatus.SUCCEEDED, second.message
    with store.read() as s:
        [lease] = [w for w in s.exec(select(WarmInstance)) if w.lessee_job_id == second.id]
        [run] = s.exec(select(Attempt).where(Attempt.job_id == second.id)).all()
    assert lease.job_id == first.id and run.instance_id == lease.instance_id  # no second launch: no boot
    assert report(store, sweep.id, clock)["spent"] <= cap + 1e-9
