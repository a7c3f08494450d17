"""End to end on this machine: the reconciler, the local provider, the real agent, a real
NumPy training job, a preemption with notice and a resume that ends with the same result."""

from __future__ import annotations

import json

from sqlmodel import select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import AttemptStatus, Checkpoint, Job, JobStatus, TerminationReason
from gpuorch.testing import e2e
from gpuorch_local.provider import LocalProvider

EXAMPLE = e2e.TINY_MLP
ENV = {"STEPS": "300", "CKPT_EVERY": "40", "STEP_SLEEP": "0.03", "SEED": "7"}


def test_preempted_job_resumes_from_final_checkpoint_with_same_result(store, tmp_path):
    local = LocalProvider(tmp_path / "local")
    rec = Reconciler(store, {"local": local}, settings=Settings(poll_s=0.2), logs=LogMirror(tmp_path))
    spec = parse_spec({"name": "mlp", "run": "python3 train.py", "workdir": str(EXAMPLE), "env": ENV,
                       "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                       "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
    job = jobs.submit(store, spec, rec.clock.now())

    def attempts():
        return e2e.attempts(store, job.id)

    e2e.passes_until(rec.run_pass, lambda: attempts() and attempts()[-1].last_checkpoint is not None)
    first = attempts()[-1]
    local.inject_preemption(first.instance_id, notice_s=15)
    e2e.passes_until(rec.run_pass, lambda: len(attempts()) == 2)
    a1, a2 = attempts()
    assert a1.status == AttemptStatus.DRAINING and a2.zone != a1.zone
    e2e.passes_until(rec.run_pass, lambda: e2e.job_status(store, job.id).terminal)

    a1, a2 = attempts()
    assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED
    with store.read() as s:
        final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.final == True)).one()  # noqa: E712
        done = s.get(Job, job.id)
    assert a2.resumed_from == final.name  # resumed from the checkpoint taken on the notice
    assert a1.lost_work_s is not None and a1.lost_work_s < 5
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
    # bitwise: nothing lost, nothing repeated
    assert json.loads(done.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, ENV)
    assert [i for i in local.list_managed() if i.state.alive] == []
    assert "resuming from" in LogMirror(tmp_path).path(job.id, 2).read_text()

