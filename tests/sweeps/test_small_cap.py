"""Sweeps that spend a small cap on trials (issue 35, item 2): no trial ends ``budget_exhausted``
while another trial's attempt is live (its reservation may still come back); trials wait, held or
queued, and only a trial that the money left cannot launch, with nothing of the sweep running, is
ended, with the numbers in its message.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) run a night of 15-minute trials in seconds; a small cap is only small against the 180 s
horizon of the default policy (a decision interval of at least 30 s), which the wall clock of the
assembled daemon would take minutes of trials to reach.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import yaml

from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Ledger, Policy, SweepState, gate_for
from gpuorch.placement import Candidate
from gpuorch.provider.port import Offer
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, AttemptStatus, JobStatus
from gpuorch.sweeps import intent
from gpuorch.sweeps.spec import load_sweep
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import report, trials

TRIAL_S = 900  # of work, after a 60 s boot: $0.32 a trial at the fake's $1.20/h spot
CAP = 1.06  # about three trials, and one horizon


def test_a_small_cap_sweep_finishes_three_trials_and_ends_the_rest_only_when_nothing_runs(store, clock, tmp_path):
    """Before: 2 of 9 finished; a third, stopped while the others' reservations filled the cap,
    was ended ``budget_exhausted`` with its work lost, though the money to finish it came back."""
    fake = FakeProvider(clock, boot_s=60, script=FakeJobScript(duration_s=TRIAL_S, checkpoint_every_s=60,
                                                                 final_checkpoint_s=5))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy())
    doc = {"name": "small", "max_parallel": 3, "budget": {"max_cost": CAP}, "deadline": "4h",
           "parameters": {"LR": [0.0003, 0.003, 0.03], "SEED": [0, 1, 2]},
           "job": {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                   "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(doc))
    sweep = intent.submit(store, *load_sweep(tmp_path / "sweep.yaml", clock.now()), clock.now())
    for _ in range(2000):
        rec.run_pass()
        if all(t.status.terminal for t in trials(store, sweep.id)):
            break
        clock.advance(10)
    ts = trials(store, sweep.id)
    counts = Counter(t.status for t in ts)
    assert counts[JobStatus.SUCCEEDED] >= 3, counts
    every = [a for t in ts for a in attempts(store, t.id)]
    for t in ts:
        if t.status != JobStatus.BUDGET_EXHAUSTED:
            continue
        assert "left" in t.message and "reserve" in t.message and "no attempt of it is running" in t.message
        live = [a for a in every if a.job_id != t.id and a.requested_at < t.finished_at
                and (a.ended_at is None or a.ended_at > t.finished_at)]
        assert live == [], f"trial {t.id} ended while {[(a.job_id, a.number) for a in live]} could return money"
    r = report(store, sweep.id, clock)
    assert r["spent"] <= CAP + 1e-9 and abs(r["left"] - (CAP - r["spent"])) < 1e-5  # the morning table says
    if counts[JobStatus.BUDGET_EXHAUSTED]:  # ... how much was left and why no further trial could start
        assert "reserves $" in r["no_more"] and "no attempt of it is running" in r["no_more"]
    assert fake.live_instances() == []


T0 = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)
SPEC = parse_spec({"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"}})
OFFER = Offer(provider="fake", region="r", zone="r-a", instance_type="gpu.x", gpu="A100-80GB", gpu_count=1,
              gpu_memory_gib=80, vcpus=8, memory_gib=64, price_per_hour=3.6, spot_price_per_hour=None,
              billing_granularity_s=1, min_billing_s=60)  # a tenth of a cent a second


def attempt(job_id: int, ended: datetime | None) -> Attempt:
    launched = T0 - timedelta(seconds=500)
    return Attempt(job_id=job_id, number=1, provider="fake", region="r", zone="r-a", instance_type="gpu.x",
                   price_per_hour=3.6, billing_granularity_s=1, min_billing_s=60, requested_at=launched,
                   launched_at=launched, runway_until=launched + timedelta(seconds=60), ended_at=ended,
                   status=AttemptStatus.ENDED if ended else AttemptStatus.RUNNING)


def gate(job_id: int, status: JobStatus, rows: list[Attempt], cap: float):
    sweep = SweepState(1, "small", cap, None, max_parallel=3, in_flight=0)
    led = Ledger.build([(a, 1) for a in rows], T0, Policy())
    return gate_for(SimpleNamespace(id=job_id, status=status), SPEC, sweep, led, Policy())  # type: ignore[arg-type]


def test_a_trial_the_rest_cannot_fund_waits_while_another_runs_then_ends_with_the_numbers():
    cap = 0.65  # trial 1 spent $0.50 and runs on: $0.15 left, a launch reserves $0.18 (180 s)
    waiting = gate(2, JobStatus.QUEUED, [attempt(1, None)], cap).unaffordable([Candidate(OFFER, spot=False)])
    assert waiting.status == JobStatus.QUEUED and waiting.message.startswith("waiting:")
    assert "$0.1500 left" in waiting.message and "$0.1800" in waiting.message
    ended = gate(2, JobStatus.QUEUED, [attempt(1, T0)], cap).unaffordable([Candidate(OFFER, spot=False)])
    assert ended.status == JobStatus.BUDGET_EXHAUSTED
    assert "$0.1500 left" in ended.message and "$0.1800 = 0 s runway + 180 s horizon at $3.6000/h" in ended.message


def test_a_running_trial_over_the_cap_is_held_while_another_runs_and_ended_when_none_does():
    cap = 1.20  # both ran 500 s ($0.50 each) and each reserves its next 180 s ($0.18)
    both = [attempt(1, None), attempt(2, None)]
    held = gate(2, JobStatus.RUNNING, both, cap).stop
    assert held is not None and held.job_status == JobStatus.HELD and "reserved" in held.message
    alone = gate(2, JobStatus.RUNNING, [attempt(1, T0), attempt(2, None)], cap).stop
    assert alone is None  # trial 1 ended: its reservation came back
    gone = gate(2, JobStatus.RUNNING, [attempt(1, T0), attempt(2, None)], 1.15).stop
    assert gone is not None and gone.job_status == JobStatus.BUDGET_EXHAUSTED
    assert "$0.1500 left" in gone.message and "reserve $0.1800" in gone.message


def test_an_idle_warm_instance_gives_way_to_running_trials_and_is_released_first():
    """bench/sweep.py --small-cap (warm): a finished trial's idle instance kept its full horizon
    reserved ahead of newer running trials, which were held for it; now it gives way to every
    other job's attempt, and its own release check counts them all running."""
    from gpuorch.money.caps import Cap

    def live(job_id, number, instance="i-1"):
        a = attempt(job_id, None)
        a.number, a.instance_id, a.status = number, instance, AttemptStatus.LAUNCHED
        a.runway_until = T0 - timedelta(seconds=100)
        return a, 0

    rows = [live(1, -7), live(2, 1, "i-2")]  # job 1's idle period, job 2's running attempt
    ledger = Ledger.build(rows, T0, Policy())
    totals = ledger.sweeps[0] if ledger.sweeps else ledger.day
    running_check = totals.committed_for(2, T0, T0)
    idle_check = totals.committed_for(1, T0, T0)
    assert running_check < idle_check  # the running trial counts the idle instance as released now
    room = running_check + 1e-6
    assert Cap("sweep", room, totals, 2).within(Policy(), T0)  # the running trial is not held for it
    assert not Cap("sweep", room, totals, 1).within(Policy(), T0)  # the idle instance is released instead
