"""The daemon's clean stop (budget, sweep deadline): ``stop.json`` -> signal -> final checkpoint
-> hand-off -> the job is stopped and the agent exits (no cloud will kill the instance for it)."""

from __future__ import annotations

import json
import signal
import time

from agent_harness import FAKE_JOB

from gpuorch.agent.protocol import STOP_FILE, write_atomic
from gpuorch.checkpoint import latest, open_store, read_final


def test_stop_file_gets_a_final_checkpoint_then_stops_the_job(start_agent, store_url):
    run = start_agent(run=FAKE_JOB, checkpoint_url=store_url, sync_interval_s=0.2, notice={"poll_s": 0.1})
    run.wait_job_ready()
    deadline = time.time() + 30
    write_atomic(run.rundir / STOP_FILE, json.dumps({"deadline": deadline}))

    status = run.wait_exit()
    final = f"step-{int((run.work / 'got-notice').read_text())}"
    assert (status.notice_reason, status.notice_deadline, status.final_done) == ("stop", deadline, True)
    assert status.final_checkpoint == status.last_checkpoint == final
    assert (status.state, status.exit_code) == ("exited", 128 + signal.SIGTERM)
    store, prefix = open_store(store_url)
    assert latest(store, prefix).name == final and read_final(store, prefix, 1).checkpoint == final
