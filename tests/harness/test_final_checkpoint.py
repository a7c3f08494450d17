"""One final checkpoint per attempt (issue 31): after a preemption notice the agent names every
upload it finishes final, and a sync already under way when the notice came lands before the
checkpoint the job takes on the notice. A daemon that read the agent's status between the two
recorded both as final, and a reader that took "the" final checkpoint of the job
(``MultipleResultsFound``, seen on a loaded machine in tests/aws/test_aws_e2e.py) broke. The
newest one recorded is the attempt's final (the one the hand-off names); earlier ones are not.

Through the assembled daemon with the sim provider (``agents: external``: the test plays the
agent by writing its ``status.json``, so the interleaving is driven step by step, no sleeps).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from sqlmodel import col, select

from gpuorch.agent.protocol import STATUS_FILE, AgentStatus, write_atomic
from gpuorch.store.models import AttemptStatus, Checkpoint
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)


def sim_config(tmp_path: Path) -> dict:
    traces = tmp_path / "traces"
    traces.mkdir()
    for zone in ("aa-1a", "bb-1a"):  # spot always available
        (traces / f"{zone}_v100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 100}))
    return {"providers": {"sim": {"traces": str(traces), "agents": "external", "boot_s": 0, "time_scale": 1}}}


def play_agent(run: Path, **fields: object) -> None:
    """Write the agent's status as the agent does (atomically: a new file each time), dated 10 s
    back (settled: the runner keeps its parsed status while the file does not change)."""
    now = time.time()
    write_atomic(run / STATUS_FILE, AgentStatus(started_at=now, running_since=now, updated_at=now,
                                                **fields).to_json())  # type: ignore[arg-type]
    back = now - 10
    os.utime(run / STATUS_FILE, (back, back))


def finals(d: AssembledDaemon, job: int) -> list[tuple[int, str]]:
    with d.store.read() as s:
        rows = s.exec(select(Checkpoint).where(Checkpoint.job_id == job, col(Checkpoint.final).is_(True)))
        return sorted((c.attempt, c.name) for c in rows)


def recorded(d: AssembledDaemon, job: int) -> set[str]:
    with d.store.read() as s:
        return set(s.exec(select(Checkpoint.name).where(Checkpoint.job_id == job)))


def test_a_sync_landing_after_the_notice_leaves_one_final_checkpoint_for_the_attempt(tmp_path):
    with AssembledDaemon.start(tmp_path / "home", sim_config(tmp_path)) as d:
        sim = d.adapter("sim")
        try:
            job = d.submit({"name": "final", "run": "python train.py", "resources": {"gpu": "V100"},
                            "spot_policy": "spot", "providers": ["sim"],
                            "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "10m"}})
            a1 = d.until(lambda: next((a for a in d.attempts(job) if a.instance_id), None), what="a launch")
            run = sim.instances_dir / a1.instance_id / "run"
            d.until(lambda: (run / "agent.json").exists(), what="the agent's start")
            play_agent(run, state="running", uploaded=["step-1"], last_checkpoint="step-1")
            d.until(lambda: "step-1" in recorded(d, job), what="the first checkpoint")

            sim.inject_preemption(a1.instance_id, notice_s=600)  # a deadline no step here waits for
            d.until(lambda: d.attempts(job)[0].status == AttemptStatus.DRAINING, what="the drain")
            notice = {"notice_at": time.time(), "notice_deadline": time.time() + 600, "notice_reason": "preemption"}
            # The sync that was under way when the notice came lands: the agent names it final...
            play_agent(run, state="checkpointing", uploaded=["step-1", "step-2"], last_checkpoint="step-2",
                       final_checkpoint="step-2", **notice)
            d.until(lambda: "step-2" in recorded(d, job), what="the sync under way at the notice")
            assert finals(d, job) == [(1, "step-2")]
            # ...then the checkpoint the job took on the notice, with which the agent hands off.
            play_agent(run, state="running", uploaded=["step-1", "step-2", "step-3"], last_checkpoint="step-3",
                       final_checkpoint="step-3", final_done=True, **notice)
            d.until(lambda: "step-3" in recorded(d, job), what="the checkpoint taken on the notice")
            d.run_pass()  # a second read of the same status changes nothing
            assert finals(d, job) == [(1, "step-3")]
            d.until(lambda: d.attempts(job)[0].status == AttemptStatus.ENDED, what="the drained attempt's end")
            assert finals(d, job) == [(1, "step-3")]
        finally:
            for inst in sim.list_managed():
                sim.terminate(inst.id)
            sim.stop_cloud()


def test_a_hand_off_with_no_upload_after_the_notice_marks_the_newest_recorded_checkpoint_final(tmp_path):
    """The agent hands off with the checkpoint already in the store (the job took none on the
    notice): that recorded row is the attempt's final one, and the daemon marks it so at the
    attempt's end (regression: no final was recorded, and a reader of the final found none)."""
    with AssembledDaemon.start(tmp_path / "home", sim_config(tmp_path)) as d:
        sim = d.adapter("sim")
        try:
            job = d.submit({"name": "handoff", "run": "python train.py", "resources": {"gpu": "V100"},
                            "spot_policy": "spot", "providers": ["sim"],
                            "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "10m"}})
            a1 = d.until(lambda: next((a for a in d.attempts(job) if a.instance_id), None), what="a launch")
            run = sim.instances_dir / a1.instance_id / "run"
            d.until(lambda: (run / "agent.json").exists(), what="the agent's start")
            play_agent(run, state="running", uploaded=["step-1", "step-2"], last_checkpoint="step-2")
            d.until(lambda: {"step-1", "step-2"} <= recorded(d, job), what="the periodic checkpoints")
            assert finals(d, job) == []

            sim.inject_preemption(a1.instance_id, notice_s=600)
            d.until(lambda: d.attempts(job)[0].status == AttemptStatus.DRAINING, what="the drain")
            notice = {"notice_at": time.time(), "notice_deadline": time.time() + 600, "notice_reason": "preemption"}
            play_agent(run, state="running", uploaded=["step-1", "step-2"], last_checkpoint="step-2",
                       final_checkpoint="step-2", final_done=True, **notice)
            d.until(lambda: d.attempts(job)[0].status == AttemptStatus.ENDED, what="the drained attempt's end")
            assert finals(d, job) == [(1, "step-2")]
        finally:
            for inst in sim.list_managed():
                sim.terminate(inst.id)
            sim.stop_cloud()
