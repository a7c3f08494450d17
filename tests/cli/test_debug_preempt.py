"""`gpuorch debug preempt`: a reclaim by hand on the local provider, seen by the daemon as a real
preemption (notice, final checkpoint, relaunch from it). The daemon is the assembled one
(``gpuorch.testing.daemon``) on the CLI's own state directory."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.store.models import TerminationReason
from gpuorch.testing import e2e
from gpuorch.testing.daemon import AssembledDaemon

runner = CliRunner()
ENV = {"STEPS": "400", "CKPT_EVERY": "40", "STEP_SLEEP": "0.02", "SEED": "5"}


def test_debug_preempt_reclaims_the_running_instance_after_its_notice(_isolated_home, tmp_path):
    with AssembledDaemon.start(_isolated_home) as d:
        job = d.submit({"name": "mlp", "run": "python3 train.py", "workdir": str(e2e.TINY_MLP), "env": ENV,
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
        d.until(lambda: (a := d.attempts(job)) and a[-1].last_checkpoint)
        r = runner.invoke(app, ["debug", "preempt", "mlp", "--notice", "3s", "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert (out["job"], out["attempt"], out["provider"], out["notice_s"]) == (job, 1, "local", 3.0)
        d.until(lambda: len(d.attempts(job)) == 2)
        d.until_terminal(job)
        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED
        assert a2.resumed_from is not None  # from the checkpoint taken on the notice
        r = runner.invoke(app, ["debug", "preempt", "mlp"])  # nothing runs any more
        assert r.exit_code == 2 and r.output.count("\n") == 1 and "has no running instance" in r.output


def test_debug_preempt_refuses_bad_input_in_one_line():
    r = runner.invoke(app, ["debug", "preempt", "nope"])
    assert r.exit_code == 3 and r.output.count("\n") == 1 and "no job 'nope'" in r.output
    r = runner.invoke(app, ["debug", "preempt", "nope", "--notice", "soon"])
    assert r.exit_code == 2 and r.output.startswith("error: --notice: ") and r.output.count("\n") == 1
