"""Many jobs race for the last dollars: two sweeps with caps, jobs with their own caps, one daily
cap, preemptions, three billing granularities, irregular passes. No cap is crossed by more than
one billing increment of one instance; in this model not at all.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import yaml
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Policy
from gpuorch.money.cost import attempt_cost, increment_cost
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, Event, Job, JobStatus
from gpuorch.sweeps import intent
from gpuorch.sweeps.spec import load_sweep
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, default_offers

TEMPLATE = {"run": "python train.py --lr {LR}", "resources": {"gpu": "A100:80GB:1"},
            "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}, "retry": {"max_preemptions": 50}}


def offers():
    """Per-second (1 min minimum), per-minute, and 10-minute increments."""
    rules = {"r1-a": (1, 60), "r1-b": (60, 60), "r2-a": (600, 600)}
    return [o.model_copy(update={"billing_granularity_s": rules[o.zone][0], "min_billing_s": rules[o.zone][1]})
            for o in default_offers() if o.gpu == "A100-80GB"]


def sweep(store, clock, tmp_path: Path, name: str, trials: int, parallel: int, cap: float, job: dict = TEMPLATE):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "job": job, "max_parallel": parallel,
                                    "parameters": {"LR": [round(0.001 * (i + 1), 4) for i in range(trials)]},
                                    "budget": {"max_cost": cap}}))
    return intent.submit(store, *load_sweep(path, clock.now()), clock.now())


def test_total_spend_never_crosses_any_cap(store, clock, tmp_path):
    rng = random.Random(11)
    fake = FakeProvider(clock, offers=offers(), script=FakeJobScript(duration_s=600, checkpoint_every_s=120))
    daily = 0.55
    rec = Reconciler(store, {"fake": fake}, clock=clock,
                     budget=Policy(daily_cap=daily, decision_interval_s=30, stop_grace_s=60))
    # alpha on demand: its ten trials race at once (a capped sweep starts spot trials one at a time
    # until each has checkpointed, Money._unproven)
    od = {**TEMPLATE, "spot_policy": "on-demand"}
    sweeps = {sweep(store, clock, tmp_path, "alpha", 10, 10, 0.25, od).id: 0.25,
              sweep(store, clock, tmp_path, "beta", 6, 3, 0.15).id: 0.15}
    job_caps = {}
    for i in range(8):
        cap = round(rng.uniform(0.03, 0.15), 3)
        spec = parse_spec({**TEMPLATE, "name": f"solo-{i}", "budget": {"max_cost": cap},
                           "spot_policy": rng.choice(["spot", "auto"])})
        job_caps[jobs.submit(store, spec, clock.now()).id] = cap

    for _ in range(450):  # about two hours: every pass within the 30 s decision interval
        rec.run_pass()
        live = [i for i in fake.live_instances() if i.preemption_deadline is None]
        if live and rng.random() < 0.04:
            victim = rng.choice(live)
            if rng.random() < 0.5:
                fake.inject_preemption(victim.id, notice_s=60)
            else:
                fake.vanish(victim.id)
        clock.advance(rng.uniform(1, 30))

    now = clock.now()
    with store.read() as s:
        rows = list(s.exec(select(Attempt, Job).join(Job, Job.id == Attempt.job_id)))
    by_job, by_sweep, total = defaultdict(float), defaultdict(float), 0.0
    for a, job in rows:
        c = attempt_cost(a, now)
        by_job[job.id] += c
        by_sweep[job.sweep_id] += c
        total += c
    increment = max(increment_cost(a) for a, _ in rows)

    assert total <= daily + increment
    for sid, cap in sweeps.items():
        assert by_sweep[sid] <= cap + increment
    for jid, cap in job_caps.items():
        assert by_job[jid] <= cap + increment
    # In this model (no spot price moves) the caps hold exactly.
    assert total <= daily + 1e-9 and all(by_sweep[s] <= c + 1e-9 for s, c in sweeps.items())
    assert all(by_job[j] <= c + 1e-9 for j, c in job_caps.items())
    # ... and the race was real: the money ran out, and every cap turned jobs away or stopped them.
    assert total > daily - 0.1
    with store.read() as s:
        statuses, messages = zip(*((j.status, j.message) for j in s.exec(select(Job))), strict=True)
        said = [*messages, *s.exec(select(Event.message))]  # a job one cap turned away may end by another
    assert statuses.count(JobStatus.BUDGET_EXHAUSTED) >= 3
    for scope in ("sweep alpha budget", "sweep beta budget", "job budget", "daily budget"):
        assert any(scope in (m or "") for m in said), scope  # every kind of cap was hit
