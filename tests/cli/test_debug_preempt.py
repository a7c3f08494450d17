"""`gpuorch debug preempt`: a reclaim by hand on the local provider, seen by the daemon as a real
preemption (notice, final checkpoint, relaunch from it)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.registry import load_providers
from gpuorch.store import Store
from gpuorch.store.models import TerminationReason
from gpuorch.store.paths import default_url
from gpuorch.testing import e2e

runner = CliRunner()
ENV = {"STEPS": "400", "CKPT_EVERY": "40", "STEP_SLEEP": "0.02", "SEED": "5"}


def test_debug_preempt_reclaims_the_running_instance_after_its_notice(_isolated_home, tmp_path):
    store = Store(default_url())
    rec = Reconciler(store, load_providers({"local": {}}, _isolated_home), settings=Settings(poll_s=0.2),
                     logs=LogMirror(_isolated_home))
    spec = parse_spec({"name": "mlp", "run": "python3 train.py", "workdir": str(e2e.TINY_MLP), "env": ENV,
                       "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                       "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
    job = jobs.submit(store, spec, rec.clock.now())
    try:
        e2e.passes_until(rec.run_pass, lambda: (a := e2e.attempts(store, job.id)) and a[-1].last_checkpoint)
        r = runner.invoke(app, ["debug", "preempt", "mlp", "--notice", "3s", "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert (out["job"], out["attempt"], out["provider"], out["notice_s"]) == (job.id, 1, "local", 3.0)
        e2e.passes_until(rec.run_pass, lambda: len(e2e.attempts(store, job.id)) == 2)
        e2e.passes_until(rec.run_pass, lambda: e2e.job_status(store, job.id).terminal)
        a1, a2 = e2e.attempts(store, job.id)
        assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED
        assert a2.resumed_from is not None  # from the checkpoint taken on the notice
        r = runner.invoke(app, ["debug", "preempt", "mlp"])  # nothing runs any more
        assert r.exit_code == 2 and r.output.count("\n") == 1 and "has no running instance" in r.output
    finally:
        rec.release_leases()
        store.close()


def test_debug_preempt_refuses_bad_input_in_one_line():
    r = runner.invoke(app, ["debug", "preempt", "nope"])
    assert r.exit_code == 3 and r.output.count("\n") == 1 and "no job 'nope'" in r.output
    r = runner.invoke(app, ["debug", "preempt", "nope", "--notice", "soon"])
    assert r.exit_code == 2 and r.output.startswith("error: --notice: ") and r.output.count("\n") == 1
