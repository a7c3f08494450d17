"""``agents: external``: the sim's runner writes ``agent.json`` once and starts nothing, for a
running instance only (its state as the provider settles it, no lock: ``ExternalAgentRunner``)."""

from __future__ import annotations

import json

import pytest
from sim_data import TRACES

from gpuorch.agent.protocol import CONFIG_FILE, AgentConfig
from gpuorch.provider.port import InstanceState, LaunchRequest
from gpuorch.runners.port import RunnerUnavailable


def _config(job_id: int, run: str = "python train.py") -> AgentConfig:
    return AgentConfig(job_id=job_id, attempt=1, job_name=f"job-{job_id}", run=run)


def _launch(sim, job_id: int):
    offer = next(o for o in sim.offers() if o.provider == "sim")
    return sim.launch(LaunchRequest(job_id=job_id, attempt=1, offer=offer, spot=False, owner="me"))


def test_a_start_writes_agent_json_once_and_starts_no_process(make_sim):
    sim = make_sim(traces=str(TRACES), boot_s=0, agents="external")
    inst = _launch(sim, 1)
    runner = sim.runner(inst)
    runner.start(_config(1))
    runner.start(_config(1, run="something else"))  # started already: the first config stays
    written = json.loads((runner.rundir / CONFIG_FILE).read_text())
    assert (written["job_id"], written["run"]) == (1, "python train.py")
    assert sorted(p.name for p in runner.rundir.iterdir()) == [CONFIG_FILE]  # no agent.pid: nothing spawned
    assert runner.status() is None


def test_a_start_on_a_booting_or_ended_instance_is_refused(make_sim):
    sim = make_sim(traces=str(TRACES), boot_s=3600, agents="external")
    booting = _launch(sim, 1)
    with pytest.raises(RunnerUnavailable, match="is pending"):
        sim.runner(booting).start(_config(1))
    sim = make_sim("up", traces=str(TRACES), boot_s=0, agents="external")
    inst = _launch(sim, 2)
    runner = sim.runner(inst)  # made while running: the terminate below is seen all the same
    sim.terminate(inst.id)
    with pytest.raises(RunnerUnavailable, match="is terminated"):
        runner.start(_config(2))
    assert not (runner.rundir / CONFIG_FILE).exists()


def test_a_start_after_a_notice_deadline_settles_the_reclaim_and_is_refused(make_sim):
    sim = make_sim(traces=str(TRACES), boot_s=0, agents="external")
    inst = _launch(sim, 1)
    runner = sim.runner(inst)
    sim.inject_preemption(inst.id, 0)  # the deadline is now: due at the start, whoever acts first
    with pytest.raises(RunnerUnavailable, match="is preempted"):
        runner.start(_config(1))
    assert sim.get(inst.id).state == InstanceState.PREEMPTED
    assert not (runner.rundir / CONFIG_FILE).exists()
