"""The example job under the real agent: preempted mid-run and resumed on a second attempt, it
ends with bitwise the same final loss as a run that was never interrupted."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

from agent_harness import TINY_MLP

from gpuorch.agent.protocol import write_atomic

STEPS, CKPT_EVERY = 40, 10
TRAIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(TINY_MLP))}"


def test_interrupted_and_resumed_run_matches_an_uninterrupted_one(start_agent, store_url, tmp_path):
    # Reference: straight through, standalone (no agent: ./checkpoints, result on stdout).
    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUORCH_")}
    out = subprocess.run(
        [sys.executable, str(TINY_MLP)],
        cwd=ref_dir,
        capture_output=True,
        text=True,
        check=True,
        env=dict(env, STEPS=str(STEPS), CKPT_EVERY=str(CKPT_EVERY)),
    )
    reference = json.loads(out.stdout.strip().splitlines()[-1])
    assert reference["steps"] == STEPS and (ref_dir / "checkpoints" / f"step-{STEPS}" / "COMPLETE").exists()

    # Attempt 1: slowed down so the notice lands mid-run; "preempted" right after the handoff.
    job_env = {"STEPS": str(STEPS), "CKPT_EVERY": str(CKPT_EVERY)}
    first = start_agent(
        "attempt1",
        run=TRAIN,
        env=dict(job_env, STEP_SLEEP="0.1"),
        checkpoint_url=store_url,
        sync_interval_s=0.2,
        notice={"kind": "file", "path": "notice.json", "poll_s": 0.1},
    )
    first.wait_for(lambda s: (s.last_checkpoint_step or 0) >= CKPT_EVERY)
    write_atomic(first.rundir / "notice.json", json.dumps({"deadline": time.time() + 30}))
    handed_off = first.wait_for(lambda s: s.final_done)
    first.kill()  # the machine is gone: agent and job die without a word
    final_step = handed_off.last_checkpoint_step
    assert handed_off.final_checkpoint == f"step-{final_step}" and CKPT_EVERY <= final_step < STEPS

    # Attempt 2: waits for attempt 1's handoff, restores its final checkpoint, finishes the run.
    second = start_agent(
        "attempt2",
        run=TRAIN,
        env=job_env,
        checkpoint_url=store_url,
        attempt=2,
        predecessor_attempt=1,
        predecessor_deadline=time.time() + 30,
    )
    status = second.wait_exit(timeout=60)
    assert status.exit_code == 0, second.logs()
    assert status.restored_from == handed_off.final_checkpoint
    assert status.result == {"final_loss": reference["final_loss"], "steps": STEPS}  # bitwise: == on floats
    metrics = [json.loads(line) for line in (second.rundir / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["step"] == STEPS and metrics[0]["step"] > final_step
