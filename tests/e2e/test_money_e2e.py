"""End to end on this machine: the local provider, the real agent and the tiny NumPy training
job: a sweep whose parameters reach the trials and whose metrics come back, through the assembled
daemon (``gpuorch.testing.daemon``); and a job stopped cleanly (final checkpoint) before its
budget is crossed."""

from __future__ import annotations

import json

import yaml
from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Policy
from gpuorch.money.cost import attempt_cost
from gpuorch.provider.port import Offer
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Checkpoint, Job, JobStatus, Sweep, TerminationReason
from gpuorch.sweeps.report import sweep_report
from gpuorch.testing import e2e
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_local.provider import LocalProvider

EXAMPLE = e2e.TINY_MLP
ENV = {"STEPS": "150", "CKPT_EVERY": "50", "STEP_SLEEP": "0.01", "LOG_EVERY": "25", "SEED": "3"}


def test_sweep_of_tiny_mlp_runs_its_trials_and_ranks_them_by_loss(tmp_path):
    doc = {"name": "mlp", "max_parallel": 2, "budget": {"max_cost": 1.0},
           "objective": {"metric": "loss", "mode": "min"},
           "parameters": {"LR": [0.0001, 0.01, 0.001]},
           "job": {"run": "python3 train.py", "workdir": str(EXAMPLE), "env": ENV, "spot_policy": "spot",
                   "resources": {"gpu": "A100:80GB:1"},
                   "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    with AssembledDaemon.start(tmp_path / "home") as d:
        sweep = d.submit_sweep(path)

        def report() -> dict:
            with d.store.read() as s:
                return sweep_report(s, s.get(Sweep, sweep["id"]), d.rec.clock.now())

        d.until(lambda: report()["status"] == "done", timeout_s=240)
        r = report()
        with d.store.read() as s:
            trial = s.exec(select(Job).where(Job.name == "mlp-1")).one()
    assert r["counts"] == {"succeeded": 3}
    losses = [t["metrics"]["loss"] for t in r["trials"]]
    assert losses == sorted(losses) and len(set(losses)) == 3  # best first; each LR trained differently
    assert all(t["metrics"]["step"] == 150 for t in r["trials"])  # the last metrics line of each run
    assert 0 < r["spent"] <= 1.0
    assert json.loads(trial.params) == {"LR": 0.01}
    # LR reached the job
    assert json.loads(trial.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, {**ENV, "LR": "0.01"})


def test_job_is_stopped_cleanly_before_its_budget_is_crossed(store, tmp_path):
    """Bare Reconciler: its budget policy decides every 5 s (the daemon's floor is 30 s) on a
    $36/h offer, so the cap is reached in seconds; tests/harness/test_gang_money.py checks caps
    through the assembled daemon."""
    dear = Offer(provider="local", region="local-east", zone="local-east-a", instance_type="local.a100-80gb.1",
                 gpu="A100-80GB", gpu_count=1, gpu_memory_gib=80, vcpus=12, memory_gib=144, price_per_hour=36.0,
                 billing_granularity_s=1, min_billing_s=0)  # a cent a second
    local = LocalProvider(tmp_path / "local", offers=[dear])
    # horizon 20 s and a runway of 3 passes (15 s): admitting a launch takes $0.35 of room
    policy = Policy(decision_interval_s=5, stop_grace_s=10)
    rec = Reconciler(store, {"local": local}, settings=Settings(poll_s=0.2), budget=policy)
    spec = parse_spec({"name": "mlp", "run": "python3 train.py", "workdir": str(EXAMPLE),
                       "env": {**ENV, "STEPS": "100000", "STEP_SLEEP": "0.03"}, "budget": {"max_cost": 0.45},
                       "resources": {"gpu": "A100:80GB:1"},
                       "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
    job = jobs.submit(store, spec, rec.clock.now())

    def status() -> JobStatus:
        with store.read() as s:
            return s.get(Job, job.id).status

    e2e.passes_until(rec.run_pass, lambda: status() == JobStatus.BUDGET_EXHAUSTED and not any(
        i.state.alive for i in local.list_managed()))
    with store.read() as s:
        [a] = jobs.attempts_of(s, job.id)
        final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.final == True)).one()  # noqa: E712
    assert a.reason == TerminationReason.BUDGET_EXHAUSTED and a.last_checkpoint == final.name
    assert "checkpoint at step" in (local.instances_dir / a.instance_id / "run" / "job.log").read_text()
    assert 0.1 < attempt_cost(a, rec.clock.now()) <= 0.45
