"""Who gets the checkpoint signal: every process of the job except a launcher (torchrun) that
would die of it while its workers catch it. The pure rule, then real processes."""

from __future__ import annotations

import os
import signal
import sys

from gpuorch.agent.job import notice_targets, notify_job, spawn
from gpuorch.testing.contract import wait_until

USR1 = int(signal.SIGUSR1)
CATCHES = 1 << (USR1 - 1)


def test_launchers_are_spared_and_everyone_else_is_signalled():
    table = {
        10: (1, 10, CATCHES),  # bash with its trap, leading the job's group
        11: (10, 10, 0),  # torchrun: no handler
        20: (11, 20, CATCHES),  # its workers, each in a session of its own
        21: (11, 21, CATCHES),
        12: (10, 10, 0),  # a helper that does not catch it and has no catching child: gets it (dies as before)
        99: (1, 99, CATCHES),  # not the job's
    }
    assert notice_targets(10, USR1, table) == [10, 12, 20, 21]


def test_a_job_that_catches_nothing_gets_the_signal_as_killpg_would_send_it():
    table = {10: (1, 10, 0), 11: (10, 10, 0)}
    assert notice_targets(10, USR1, table) == [10, 11]


LAUNCHER = """
import subprocess, sys
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
sys.exit(worker.wait())
"""
WORKER = """
import signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
open("ready", "w").close()
while not got:
    time.sleep(0.05)
open("checkpointed", "w").close()
"""


def test_a_torchrun_like_launcher_survives_while_its_worker_in_another_session_checkpoints(tmp_path):
    command = f"{sys.executable} -c '{LAUNCHER}' '{WORKER}'"
    proc = spawn(command, tmp_path, dict(os.environ), tmp_path / "job.log", signal.SIGUSR1)
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), timeout_s=30, what="the worker")
        notify_job(proc, signal.SIGUSR1)
        assert proc.wait(timeout=30) == 0  # the launcher was not killed: it returned the worker's exit
        assert (tmp_path / "checkpointed").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
