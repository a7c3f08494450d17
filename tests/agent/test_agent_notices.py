"""Preemption handling end to end: notice -> signal -> final checkpoint -> handoff record."""

from __future__ import annotations

import json
import signal
import time

from agent_harness import FAKE_JOB

from gpuorch.agent.protocol import write_atomic
from gpuorch.checkpoint import latest, open_store, read_final

FILE_NOTICE = {"kind": "file", "path": "notice.json", "poll_s": 0.1}


def _final_checkpoint_of(run) -> str:
    """The checkpoint the fake job wrote when it got the signal."""
    return f"step-{int((run.work / 'got-notice').read_text())}"


def test_file_notice_gets_the_final_checkpoint_uploaded_before_the_deadline(start_agent, store_url):
    run = start_agent(run=FAKE_JOB, checkpoint_url=store_url, sync_interval_s=0.2, notice=FILE_NOTICE)
    run.wait_job_ready()
    deadline = time.time() + 30
    write_atomic(run.rundir / "notice.json", json.dumps({"deadline": deadline}))

    status = run.wait_for(lambda s: s.final_done)
    final = _final_checkpoint_of(run)
    assert (status.notice_reason, status.notice_deadline) == ("preemption", deadline)
    assert status.final_checkpoint == status.last_checkpoint == final
    store, prefix = open_store(store_url)
    manifest = latest(store, prefix)
    assert manifest.name == final and manifest.created_at < deadline
    record = read_final(store, prefix, 1)
    assert (record.attempt, record.checkpoint) == (1, final) and record.at < deadline

    # The job keeps running after the handoff (the cloud ends it); SIGTERM makes the agent stop it.
    run.proc.send_signal(signal.SIGTERM)
    status = run.wait_exit()
    assert (status.state, status.exit_code) == ("exited", 128 + signal.SIGTERM)


def test_handoff_without_a_new_checkpoint_at_the_grace_point(start_agent, store_url):
    run = start_agent(
        run="trap '' USR1; touch ready; sleep 30",
        checkpoint_url=store_url,
        notice=FILE_NOTICE,
        final_checkpoint_grace_s=1.0,
    )
    run.wait_for(lambda s: (run.work / "ready").exists())
    write_atomic(run.rundir / "notice.json", json.dumps({"deadline": time.time() + 2}))
    status = run.wait_for(lambda s: s.final_done)
    assert status.final_checkpoint is None and status.state == "running"
    store, prefix = open_store(store_url)
    assert read_final(store, prefix, 1).checkpoint is None


def test_a_hand_off_with_no_upload_after_the_notice_names_the_newest_checkpoint_final(start_agent, store_url):
    """The job took a checkpoint before the notice and none on it: the agent hands off with that
    one, and names it the attempt's final checkpoint (regression: final_checkpoint stayed None)."""
    ckpt = '"$GPUORCH_CHECKPOINT_DIR/step-1"'
    run = start_agent(
        run=f"mkdir -p {ckpt} && echo 1 > {ckpt}/state.txt && echo {{}} > {ckpt}/COMPLETE && "
            "trap '' USR1; touch ready; sleep 30",
        checkpoint_url=store_url, sync_interval_s=0.2, notice=FILE_NOTICE, final_checkpoint_grace_s=1.0,
    )
    run.wait_for(lambda s: s.last_checkpoint == "step-1" and (run.work / "ready").exists())
    write_atomic(run.rundir / "notice.json", json.dumps({"deadline": time.time() + 2}))
    status = run.wait_for(lambda s: s.final_done)
    assert status.final_checkpoint == status.last_checkpoint == "step-1"
    store, prefix = open_store(store_url)
    assert read_final(store, prefix, 1).checkpoint == "step-1"


def test_sigterm_to_the_agent_checkpoints_then_stops_the_job(start_agent, store_url):
    run = start_agent(run=FAKE_JOB, checkpoint_url=store_url)
    run.wait_job_ready()
    run.proc.send_signal(signal.SIGTERM)
    status = run.wait_exit()
    assert (status.notice_reason, status.final_done) == ("sigterm", True)
    assert status.final_checkpoint == _final_checkpoint_of(run)
    assert status.exit_code == 128 + signal.SIGTERM
    store, prefix = open_store(store_url)
    assert read_final(store, prefix, 1).checkpoint == status.final_checkpoint


def test_dead_man_switch_checkpoints_then_runs_the_shutdown_command(start_agent, store_url):
    # No heartbeat file at all: the timeout counts from the agent's start.
    run = start_agent(
        run=FAKE_JOB,
        env={"EXIT_ON_NOTICE": "1"},
        checkpoint_url=store_url,
        heartbeat_timeout_s=2.0,
        shutdown_command="touch shutdown-ran",
    )
    status = run.wait_exit()
    assert (status.notice_reason, status.final_done, status.exit_code) == ("heartbeat", True, 0)
    assert status.notice_deadline - status.notice_at > 30
    assert status.final_checkpoint == _final_checkpoint_of(run)
    assert (run.work / "shutdown-ran").exists()


def test_fresh_heartbeats_keep_the_dead_man_switch_quiet(start_agent):
    run = start_agent(
        run=FAKE_JOB + " && sleep 0",
        env={"STEPS": "25"},
        heartbeat_timeout_s=5.0,
        shutdown_command="touch shutdown-ran",
    )
    while run.proc.poll() is None:
        (run.rundir / "heartbeat").touch()
        time.sleep(0.1)
    status = run.wait_exit()
    assert (status.notice_reason, status.exit_code) == (None, 0)
    assert not (run.work / "shutdown-ran").exists()


def test_aws_notice_end_to_end(start_agent, store_url, imds):
    run = start_agent(run=FAKE_JOB, checkpoint_url=store_url, notice={"kind": "aws", "url": imds.url, "poll_s": 0.1})
    run.wait_job_ready()
    when = int(time.time()) + 60
    imds.action = {"action": "terminate", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))}
    status = run.wait_for(lambda s: s.final_done)
    assert (status.notice_reason, status.notice_deadline) == ("preemption", when)
    assert status.final_checkpoint == _final_checkpoint_of(run)
    assert imds.unauthorized == 0


def test_azure_notice_end_to_end(start_agent, store_url, scheduled_events):
    from fake_scheduled_events import event

    run = start_agent(run=FAKE_JOB, checkpoint_url=store_url,
                      notice={"kind": "azure", "url": scheduled_events.url, "poll_s": 0.1})
    run.wait_job_ready()
    when = int(time.time()) + 60
    scheduled_events.announce(event("Preempt", when))
    status = run.wait_for(lambda s: s.final_done)
    assert (status.notice_reason, status.notice_deadline) == ("preemption", when)
    assert status.final_checkpoint == _final_checkpoint_of(run)
    assert scheduled_events.without_header == 0
