"""Change is a value, never an identity (DESIGN.md 4, docs/recovery.md "Change is a value"): a
runner may hand out one status object again, refreshed in place (``Runner.status``), and the
daemon still sees each change. Before, the steady pass kept a job whose agent status was "the
same object as then" (``reconciler/steady.py``): a finished job stayed ``running`` forever, its
instance billing."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from pydantic import ValidationError

from gpuorch.agent.protocol import AgentStatus
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.runners.port import Runner, status_value
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


def _another(value: object, annotation: str) -> object:
    """A value of the field's type unlike ``value``."""
    if "bool" in annotation:
        return not value
    if "str" in annotation:
        return f"{value}-changed"
    if "int" in annotation:
        return (value or 0) + 1  # type: ignore[operator]
    if "float" in annotation:
        return (value or 0.0) + 0.5  # type: ignore[operator]
    raise AssertionError(f"AgentStatus has a field of a type this test does not know: {annotation}")


@pytest.mark.parametrize("name", [f.name for f in fields(AgentStatus)])
def test_a_change_of_any_status_field_in_place_changes_its_value(name):
    """``status_value`` is taken over every field the status model has (one added later too):
    assigning any field, appending to a list or editing the result dict in place, is a change."""
    annotation = str(next(f.type for f in fields(AgentStatus) if f.name == name))
    status = AgentStatus(state="running", uploaded=["ckpt-1"], result={"loss": 1.0})
    before = status_value(status)
    current = getattr(status, name)
    if isinstance(current, list):
        current.append("more")
    elif isinstance(current, dict):
        current["loss"] = 0.5
    else:
        setattr(status, name, _another(current, annotation))
    assert status_value(status) != before
    assert status_value(AgentStatus(**{f.name: getattr(status, f.name) for f in fields(AgentStatus)})) \
        == status_value(status), "a value, not an identity: an equal status is the same value"


def test_an_instance_is_a_frozen_value():
    """What lets the daemon take the very Instance again for "unchanged" (``Provider.get``)."""
    inst = Instance(id="i-1", provider="p", region="r", zone="z", instance_type="t", spot=False,
                    state=InstanceState.RUNNING)
    with pytest.raises(ValidationError):
        inst.state = InstanceState.TERMINATED  # type: ignore[misc]
