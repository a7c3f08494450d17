"""The morning, through the CLI on a real SQLite store: `sweep update` raises the cap or moves
the deadline, `sweep resume` restarts a finished or cancelled sweep's unfinished trials, `sweep
submit` warns when the cap cannot run max_parallel trials; and bad input exits 2 with one line
naming the field, changing nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from sqlmodel import select
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, Sweep, TerminationReason

runner = CliRunner()
SWEEP = {"name": "lr", "job": {"run": "python3 train.py --lr {LR}", "resources": {"gpu": "A100:80GB:1"},
                               "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}},
         "parameters": {"LR": [0.001, 0.01, 0.1]}, "max_parallel": 2, "budget": {"max_cost": 5},
         "deadline": "8h", "objective": {"metric": "loss", "mode": "min"}}


def cli(*args):
    return runner.invoke(app, list(args))


def submitted(tmp_path, **fields):
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({**SWEEP, **fields}))
    r = cli("sweep", "submit", str(p), "--json")
    assert r.exit_code == 0, r.output
    return r


def status():
    return json.loads(cli("sweep", "status", "lr", "--json").output)


def bill(hours=1.0, price=1.2, checkpoint="p000100-a1", reason=TerminationReason.BUDGET_EXHAUSTED):
    """Trial lr-0 ran ``hours`` at ``price`` and ended with ``reason`` (its job budget_exhausted)."""
    store = Store(load_config().url)
    end = datetime.now(UTC) - timedelta(minutes=1)
    with store.write() as s:
        job = s.exec(select(Job).where(Job.name == "lr-0")).one()
        s.add(Attempt(job_id=job.id, number=1, provider="fake", region="r", zone="z", instance_type="x",
                      price_per_hour=price, status=AttemptStatus.ENDED, reason=reason,
                      launched_at=end - timedelta(hours=hours), ended_at=end, last_checkpoint=checkpoint))
        job.status, job.finished_at = JobStatus.BUDGET_EXHAUSTED, end
    store.close()


def test_update_raises_the_cap_and_moves_the_deadline(tmp_path):
    submitted(tmp_path)
    r = cli("sweep", "update", "lr", "--budget", "9.5", "--deadline", "12h", "--json")
    assert r.exit_code == 0, r.output
    st = status()
    assert st["max_cost"] == 9.5
    moved = datetime.fromisoformat(st["deadline"]) - datetime.now(UTC)
    assert timedelta(hours=11, minutes=59) < moved <= timedelta(hours=12)


@pytest.mark.parametrize(("args", "field"), [
    (["--budget", "1.0"], "--budget: $1.00 is below the $1.2000 already spent"),
    (["--budget", "-3"], "--budget: $-3.00 is not a budget"),
    (["--deadline", "2020-01-01T00:00"], "--deadline: 2020-01-01 00:00 UTC is in the past"),
    (["--deadline", "soon"], "--deadline:"),
    ([], "update: nothing to change"),
])
def test_bad_updates_exit_2_with_one_line_and_change_nothing(tmp_path, args, field):
    submitted(tmp_path)
    bill()  # $1.20 spent
    before = status()
    r = cli("sweep", "update", "lr", *args)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and field in r.output, r.output
    after = status()
    assert (after["max_cost"], after["deadline"]) == (before["max_cost"], before["deadline"])


def test_resume_restarts_unfinished_trials_held_where_they_have_a_checkpoint(tmp_path):
    submitted(tmp_path)
    bill()
    r = cli("sweep", "resume", "lr")
    assert r.exit_code == 2 and "is still active" in r.output  # an active sweep is updated, not resumed
    assert cli("sweep", "cancel", "lr").exit_code == 0
    store = Store(load_config().url)
    with store.write() as s:  # what the daemon does with the cancel requests
        for j in s.exec(select(Job).where(Job.status == JobStatus.QUEUED)):
            j.status = JobStatus.CANCELLED
    r = cli("sweep", "resume", "lr", "--budget", "8", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["trials_resumed"] == 3
    with store.read() as s:
        jobs = {j.name: j for j in s.exec(select(Job))}
        sweep = s.exec(select(Sweep)).one()
    store.close()
    assert jobs["lr-0"].status == JobStatus.HELD  # resumes from its checkpoint, before fresh trials
    assert {jobs["lr-1"].status, jobs["lr-2"].status} == {JobStatus.QUEUED}
    assert not any(j.cancel_requested for j in jobs.values()) and sweep.status.value == "active"
    assert sweep.max_cost == 8


def test_submit_warns_in_one_line_when_the_cap_runs_fewer_trials_than_max_parallel(tmp_path):
    r = submitted(tmp_path, budget={"max_cost": 0.05}, max_parallel=3)
    warning = json.loads(r.output[r.output.index("{"):])["warning"]
    assert "budget.max_cost: $0.05 admits 0 trial(s) at once, not max_parallel 3" in warning
    assert "\n" not in warning
    assert json.loads(submitted(tmp_path, name="rich", budget={"max_cost": 50}).output)["warning"] is None


@pytest.mark.parametrize(("change", "field"), [
    ({"pruning": {"rule": "hyperband"}}, "pruning.rule: 'hyperband' is not a pruning rule; use median or asha"),
    ({"pruning": {"rule": "median", "metric": "acc"}}, "pruning.metric: 'acc' is not the objective's metric"),
    ({"pruning": {"rule": "asha"}, "objective": None}, "pruning: needs an objective"),
    ({"objective": {"metric": "loss", "source": "stdout"}}, "objective.source"),
])
def test_bad_pruning_exits_2_with_one_line_and_stores_nothing(tmp_path, change, field):
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({k: v for k, v in {**SWEEP, **change}.items() if v is not None}))
    r = cli("sweep", "submit", str(p))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and field in r.output, r.output
    assert json.loads(cli("sweep", "status", "--json").output) == []
