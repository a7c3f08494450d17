"""The agent's lifecycle: exit codes, setup, env, periodic sync, restore, predecessor wait, failures."""

from __future__ import annotations

import subprocess
import sys
import time

from agent_harness import FAKE_JOB, REPO, job_env_seen

from gpuorch.agent.protocol import read_status
from gpuorch.checkpoint import latest, list_manifests, open_store, read_final, upload, write_final
from gpuorch.checkpoint.handoff import completed_key


def test_exit_code_and_result_propagate(start_agent):
    run = start_agent(run='echo hello; echo \'{"acc": 0.5}\' > "$GPUORCH_RESULT_FILE"; exit 7')
    status = run.wait_exit()
    assert (status.state, status.exit_code, status.result) == ("exited", 7, {"acc": 0.5})
    assert run.proc.returncode == 7
    assert "hello" in (run.rundir / "job.log").read_text()
    assert status.ended_at is not None and status.started_at is not None
    assert status.started_at <= status.running_since <= status.ended_at  # when the job itself started


def test_job_env(start_agent, store_url):
    run = start_agent(run=FAKE_JOB, env={"STEPS": "1", "MY_VAR": "x"}, checkpoint_url=store_url, job_id=4, attempt=2)
    assert run.wait_exit().exit_code == 0
    env = job_env_seen(run)
    assert env["GPUORCH_CHECKPOINT_DIR"] == str(run.work / "checkpoints")
    assert (env["GPUORCH_JOB_ID"], env["GPUORCH_ATTEMPT"], env["GPUORCH_JOB_NAME"]) == ("4", "2", "test-job")
    assert env["GPUORCH_RESULT_FILE"] == str(run.rundir / "result.json")
    assert env["GPUORCH_METRICS_FILE"] == str(run.rundir / "metrics.jsonl")
    assert "GPUORCH_RESUMED_FROM" not in env  # nothing to resume from


def test_setup_failure_stops_before_the_job(start_agent):
    run = start_agent(setup="echo preparing; exit 4", run="touch ran")
    status = run.wait_exit()
    assert (status.state, status.exit_code) == ("exited", 4)
    assert not (run.work / "ran").exists()
    assert "preparing" in (run.rundir / "job.log").read_text()


def test_setup_then_run_in_work_dir(start_agent):
    run = start_agent(setup="echo ready > setup.txt", run="cat setup.txt")
    assert run.wait_exit().exit_code == 0
    assert "ready" in (run.rundir / "job.log").read_text()


def test_checkpoints_are_uploaded_while_the_job_runs(start_agent, store_url):
    run = start_agent(
        run=FAKE_JOB,
        env={"STEPS": "40", "EVERY": "5"},
        checkpoint_url=store_url,
        sync_interval_s=0.2,
        keep_checkpoints=2,
    )
    during = run.wait_for(lambda s: s.state == "running" and len(s.uploaded) >= 1)
    assert during.last_checkpoint == during.uploaded[-1] and during.last_checkpoint_step is not None
    assert during.last_checkpoint_at is not None
    status = run.wait_exit()
    assert status.exit_code == 0
    store, prefix = open_store(store_url)
    assert latest(store, prefix).name == "step-40" == status.last_checkpoint  # the final sync
    assert len(list_manifests(store, prefix)) == 2  # pruned to keep_checkpoints
    frozen = {f.sha256 for m in list_manifests(store, prefix) for f in m.files if f.path == "frozen.bin"}
    assert len(frozen) == 1  # the same bytes in every checkpoint: one blob


def test_second_attempt_restores_the_latest_checkpoint(start_agent, store_url):
    first = start_agent("attempt1", run=FAKE_JOB, env={"STEPS": "5", "EVERY": "5"}, checkpoint_url=store_url)
    assert first.wait_exit().last_checkpoint == "step-5"
    store, prefix = open_store(store_url)  # as if attempt 1 was reclaimed after its last checkpoint,
    store.delete(completed_key(prefix))  # before it finished: a finished job is never run again

    second = start_agent(
        "attempt2", run=FAKE_JOB, env={"STEPS": "8", "EVERY": "4"}, checkpoint_url=store_url, attempt=2
    )
    status = second.wait_exit()
    assert status.restored_from == "step-5"
    assert job_env_seen(second)["GPUORCH_RESUMED_FROM"] == "step-5"
    assert "start at step 5" in (second.rundir / "job.log").read_text()
    restored = second.work / "checkpoints" / "step-5"
    assert (restored / "state.txt").read_text() == "5" and (restored / "COMPLETE").exists()
    assert status.last_checkpoint == "step-8"


def test_waits_for_the_predecessors_handoff_before_restoring(start_agent, store_url, tmp_path):
    store, prefix = open_store(store_url)
    run = start_agent(
        run=FAKE_JOB,
        env={"STEPS": "1"},
        checkpoint_url=store_url,
        attempt=2,
        predecessor_attempt=1,
        predecessor_deadline=time.time() + 30,
    )
    run.wait_for(lambda s: s.state == "starting")
    # Attempt 1's final checkpoint lands only now: attempt 2 can restore it only if it waited.
    ckpt = tmp_path / "late" / "step-9"
    ckpt.mkdir(parents=True)
    (ckpt / "state.txt").write_text("9")
    (ckpt / "COMPLETE").write_text('{"step": 9}')
    upload(store, prefix, ckpt, attempt=1)
    write_final(store, prefix, 1, "step-9")
    assert run.wait_exit().restored_from == "step-9"


def test_gives_up_on_a_silent_predecessor_at_its_deadline(start_agent, store_url):
    run = start_agent(
        run="true", checkpoint_url=store_url, attempt=2, predecessor_attempt=1, predecessor_deadline=time.time() + 0.5
    )
    status = run.wait_exit()
    assert (status.exit_code, status.restored_from) == (0, None)
    store, prefix = open_store(store_url)
    assert read_final(store, prefix, 1) is None


def test_falls_back_to_the_previous_checkpoint_when_the_latest_is_corrupt(start_agent, store_url, tmp_path):
    store, prefix = open_store(store_url)
    for step in (1, 2):
        ckpt = tmp_path / "local" / f"step-{step}"
        ckpt.mkdir(parents=True)
        (ckpt / "state.txt").write_text(str(step))
        (ckpt / "COMPLETE").write_text("")
        manifest = upload(store, prefix, ckpt, attempt=1)
    blob = next(f.sha256 for f in manifest.files if f.path == "state.txt")
    store.put_bytes(f"blobs/{blob}", b"garbage")
    status = start_agent(run="true", checkpoint_url=store_url).wait_exit()
    assert status.restored_from == "step-1"


def test_agent_failure_is_reported_not_silent(start_agent):
    run = start_agent(run="true", signal="SIGNOPE")
    status = run.wait_exit()
    assert status.state == "failed"
    assert "signal 'SIGNOPE' is not a signal name" in status.error
    assert run.proc.returncode == 70


def test_unreadable_config_is_reported_in_status(tmp_path):
    rundir = tmp_path / "run"
    rundir.mkdir()
    (rundir / "agent.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "gpuorch.agent", str(rundir)], cwd=REPO, capture_output=True)
    assert done.returncode == 70
    status = read_status(rundir)
    assert status.state == "failed" and status.error.startswith("JSONDecodeError")
    assert subprocess.run([sys.executable, "-m", "gpuorch.agent"], cwd=REPO, capture_output=True).returncode == 64
