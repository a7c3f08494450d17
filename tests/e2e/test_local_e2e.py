"""End to end through the assembled daemon (``gpuorch.testing.daemon``: the embedded default, as
``gpuorch daemon`` builds it): the local provider, the real agent, a real NumPy training job, a
preemption with notice and a resume that ends with the same result."""

from __future__ import annotations

import json

from sqlmodel import select

from gpuorch.jobs.logmirror import LogMirror
from gpuorch.store.models import AttemptStatus, Checkpoint, JobStatus, TerminationReason
from gpuorch.testing import e2e
from gpuorch.testing.daemon import AssembledDaemon

EXAMPLE = e2e.TINY_MLP
ENV = {"STEPS": "300", "CKPT_EVERY": "40", "STEP_SLEEP": "0.03", "SEED": "7"}


def test_preempted_job_resumes_from_final_checkpoint_with_same_result(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit({"name": "mlp", "run": "python3 train.py", "workdir": str(EXAMPLE), "env": ENV,
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None)
        first = d.attempts(job)[-1]
        local = d.adapter("local")
        local.inject_preemption(first.instance_id, notice_s=15)
        d.until(lambda: len(d.attempts(job)) == 2)
        a1, a2 = d.attempts(job)
        assert a1.status == AttemptStatus.DRAINING and a2.zone != a1.zone
        done = d.until_terminal(job)

        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED
        with d.store.read() as s:
            final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job, Checkpoint.final == True)).one()  # noqa: E712
        assert a2.resumed_from == final.name  # resumed from the checkpoint taken on the notice
        assert a1.lost_work_s is not None and a1.lost_work_s < 5
        assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
        # bitwise: nothing lost, nothing repeated
        assert json.loads(done.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, ENV)
        assert [i for i in local.list_managed() if i.state.alive] == []
        assert "resuming from" in LogMirror(d.config.home).path(job, 2).read_text()
