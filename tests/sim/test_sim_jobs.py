"""Sim instances run the real agent and the real job: a reclaim kills the job after its notice,
and the reconciler recovers from it; orphans are collected in both directions.

Bare Reconciler: the SimProvider is built with a scripted market the test inspects directly.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from sim_data import write_trace
from sqlmodel import select

from gpuorch.agent.protocol import AgentConfig
from gpuorch.checkpoint import list_manifests, open_store
from gpuorch.errors import TransientError
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.localdir.procs import process_alive
from gpuorch.provider.port import InstanceState, LaunchRequest
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Checkpoint, Event, JobStatus, TerminationReason
from gpuorch.testing import wait_until
from gpuorch.testing.e2e import attempts, job_status, passes_until

FAKE_JOB = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).parents[1] / 'agent' / 'fake_job.py'))}"


@pytest.fixture
def two_zones(make_sim, tmp_path):
    """aa-1a (cheapest, GCP-style 30 s notices) and bb-1a, both selling spot for the whole test."""
    f = write_trace(tmp_path / "up.json", [1], gap_s=3600)
    return make_sim(traces=[f"aa-1a={f}", f"bb-1a={f}"], zones={"aa-1a": {"flavour": "gcp"}, "bb-1a": {"region": "bb"}},
                    time_scale=10, boot_s=0, spot_price=1.0, prices=None)


def test_a_reclaim_kills_the_running_job_after_its_notice(two_zones, tmp_path):
    sim = two_zones
    inst = sim.launch(LaunchRequest(job_id=1, attempt=1, offer=sim.offers()[0], spot=True))
    runner = sim.runner(inst)
    store_url = (tmp_path / "ckpt").as_uri()
    runner.start(AgentConfig(job_id=1, attempt=1, job_name="t", run=FAKE_JOB, checkpoint_url=store_url,
                             env={"STEPS": "100000", "STEP_S": "0.01"}, sync_interval_s=0.2))
    st = wait_until(lambda: (s := runner.status()) and s.state == "running" and s.pid and s, what="the job")
    # The job says "start" once its SIGUSR1 handler is set: a notice before that kills it (exit 138).
    wait_until(lambda: b"start at step" in runner.read_log()[0], what="the job's handler")
    sim.inject_preemption(inst.id, notice_s=3.0)
    done = wait_until(lambda: (s := runner.status()) and s.final_done and s, what="the final checkpoint")
    assert done.notice_reason == "preemption" and done.final_checkpoint is not None
    gone = wait_until(lambda: not (i := sim.get(inst.id)).state.alive and i, what="the reclaim")
    assert gone.state == InstanceState.PREEMPTED
    assert not process_alive(st.pid)  # the job's process group is dead
    [final] = [m for m in list_manifests(*open_store(store_url)) if m.name == done.final_checkpoint]
    assert final.created_at < gone.preemption_deadline.timestamp()  # durable before the kill


def test_the_replacement_is_requested_on_the_notice_and_resumes_from_the_final_checkpoint(two_zones, store, tmp_path):
    sim = two_zones
    rec = Reconciler(store, {"sim": sim}, settings=Settings(poll_s=0.1))
    spec = parse_spec({"name": "t", "run": FAKE_JOB, "env": {"STEPS": "400", "EVERY": "100", "STEP_S": "0.02"},
                       "spot_policy": "spot",
                       "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "0.3s"}})
    job = jobs.submit(store, spec, rec.clock.now())

    passes_until(rec.run_pass, lambda: (a := attempts(store, job.id)) and a[0].started_at)
    a1 = attempts(store, job.id)[0]
    assert a1.zone == "aa-1a"
    # A notice longer than the agent's 5 s grace: with less, the agent hands off at once with the
    # newest checkpoint already uploaded (no final one), which a loaded machine made this test see.
    sim.inject_preemption(a1.instance_id, notice_s=15.0)
    passes_until(rec.run_pass, lambda: len(attempts(store, job.id)) == 2)
    a1, a2 = attempts(store, job.id)
    assert a2.requested_at <= a1.drain_until and a2.predecessor == 1  # asked for before the kill
    assert a2.zone == "bb-1a"  # same-region-first: nothing else in aa-1a's region
    passes_until(rec.run_pass, lambda: job_status(store, job.id).terminal)
    a1, a2 = attempts(store, job.id)
    assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED
    with store.read() as s:
        final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.final == True)).one()  # noqa: E712
    assert final.attempt == 1 and a2.resumed_from == final.name
    assert job_status(store, job.id) == JobStatus.SUCCEEDED


def test_gc_terminates_instances_no_live_attempt_owns(two_zones, store):
    sim = two_zones
    rec = Reconciler(store, {"sim": sim}, settings=Settings(poll_s=0.1))
    stray = sim.launch(LaunchRequest(job_id=999, attempt=1, offer=sim.offers()[0], spot=False,
                                     owner=store.installation_id))
    foreign = sim.launch(LaunchRequest(job_id=998, attempt=1, offer=sim.offers()[0], spot=False, owner="someone-else"))
    rec.run_pass()
    assert sim.get(stray.id).state == InstanceState.TERMINATED
    assert sim.get(foreign.id).state.alive
    with store.read() as s:
        assert s.exec(select(Event).where(Event.kind == "orphan_terminated")).one().job_id == 999


def test_gc_after_an_attempt_ended_but_its_terminate_failed(two_zones, store, tmp_path):
    sim = two_zones
    rec = Reconciler(store, {"sim": sim}, settings=Settings(poll_s=0.1))
    job = jobs.submit(store, parse_spec({"name": "t", "run": "sleep 600"}), rec.clock.now())
    passes_until(rec.run_pass, lambda: (a := attempt_of(store, job.id)) and a.started_at)
    inst_id = attempt_of(store, job.id).instance_id
    real = sim._terminate

    def failing(instance_id: str) -> None:
        raise TransientError("internal error", code="InternalError")

    sim._terminate = failing
    jobs.cancel(store, str(job.id), rec.clock.now())
    rec.run_pass()  # the attempt ends (cancelled); its terminate failed
    assert attempt_of(store, job.id).reason == TerminationReason.CANCELLED and sim.get(inst_id).state.alive
    sim._terminate = real
    rec.run_pass()  # no live attempt owns it any more: the sweep terminates it
    assert sim.get(inst_id).state == InstanceState.TERMINATED


def test_an_attempt_whose_instance_vanished_is_closed_and_relaunched(two_zones, store, tmp_path):
    sim = two_zones
    rec = Reconciler(store, {"sim": sim}, settings=Settings(poll_s=0.1))
    spec = parse_spec({"name": "t", "run": FAKE_JOB, "env": {"STEPS": "300", "EVERY": "50", "STEP_S": "0.02"},
                       "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "0.3s"}})
    job = jobs.submit(store, spec, rec.clock.now())
    passes_until(rec.run_pass, lambda: (a := attempt_of(store, job.id)) and a.last_checkpoint)
    a1 = attempt_of(store, job.id)
    sim._terminate(a1.instance_id)  # kill its processes, then the cloud forgets it entirely
    shutil.rmtree(sim.instances_dir / a1.instance_id)
    passes_until(rec.run_pass, lambda: job_status(store, job.id).terminal)
    with store.read() as s:
        a1, a2 = jobs.attempts_of(s, job.id)
    assert a1.reason == TerminationReason.LOST and "disappeared" in a1.message
    assert a2.resumed_from is not None and a2.reason == TerminationReason.SUCCEEDED


def attempt_of(store, job_id):
    return (attempts(store, job_id) or [None])[-1]

