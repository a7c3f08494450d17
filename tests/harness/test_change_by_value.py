"""Change is a value, never an identity (DESIGN.md 4, docs/recovery.md "Change is a value"): a
runner may hand out one status object again, refreshed in place (``Runner.status``), and the
daemon still sees each change. Before, the steady pass kept a job whose agent status was "the
same object as then" (``reconciler/steady.py``): a finished job stayed ``running`` forever, its
instance billing."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.provider.port import Instance, InstanceState
from gpuorch.runners.port import Runner
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.runner_contract import InPlaceStatusRunner

pytestmark = pytest.mark.timeout(300)


def _reused_instances(adapter: Any) -> None:
    """Make ``adapter`` list an unchanged instance as the very object it listed last (as the sim
    does): allowed, and what lets the steady pass keep a running job without deciding it again."""
    last: dict[str, Instance] = {}
    real = adapter.list_managed

    def list_managed() -> list[Instance]:
        out = []
        for inst in real():
            was = last.get(inst.id)
            last[inst.id] = inst if was is None or was != inst else was
            out.append(last[inst.id])
        return out

    adapter.list_managed = list_managed


def _in_place_runners(adapter: Any) -> dict[str, InPlaceStatusRunner]:
    """Make ``adapter`` hand out one runner per instance, whose status object is refreshed in place."""
    made: dict[str, InPlaceStatusRunner] = {}
    real = adapter.runner

    def runner(instance: Instance) -> Runner:
        if instance.id not in made:
            made[instance.id] = InPlaceStatusRunner(real(instance))
        return made[instance.id]

    adapter.runner = runner  # the instance's attribute: what every wrapper above it calls
    return made


def test_a_finished_job_ends_and_its_instance_stops_billing_when_its_runner_refreshes_in_place(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        local = d.adapter("local")
        _reused_instances(local)
        made = _in_place_runners(local)
        marker = tmp_path / "go"
        job = d.submit({"name": "in-place", "run": f"until test -e {marker}; do sleep 0.1; done; echo done",
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        # Running and steady: the daemon has decided on this very status object at least once
        d.until(lambda: d.status(job) == JobStatus.RUNNING and any(
            r.kept is not None and r.kept.state == "running" for r in made.values()), what="the job to run")
        (runner,) = made.values()
        seen = runner.kept
        d.until(lambda: d.rec.steady.skipped, what="a steady pass to keep the job undecided")
        marker.touch()
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        assert runner.kept is seen and seen is not None and seen.state == "exited"  # refreshed in place all along
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.SUCCEEDED
        assert a.instance_id is not None
        d.until(lambda: not local.get(a.instance_id).state.alive, what="the instance to be terminated")
        assert local.get(a.instance_id).state == InstanceState.TERMINATED
