"""The dead-man switch wired from the assembled daemon (``heartbeat_timeout_s: 3`` in its config
file): the reconciler heartbeats each running attempt;
when it goes silent, the real agent takes a final checkpoint and its instance terminates itself;
the daemon, back, relaunches from that checkpoint."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from gpuorch.agent.protocol import read_status
from gpuorch.provider.localdir.instances import InstanceDir
from gpuorch.provider.port import InstanceState
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing import wait_until
from gpuorch.testing.daemon import AssembledDaemon

FAKE_JOB = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).parents[1] / 'agent' / 'fake_job.py'))}"


def test_a_silent_daemon_makes_the_agent_checkpoint_and_terminate_its_instance(tmp_path):
    with AssembledDaemon.start(tmp_path / "home", {"heartbeat_timeout_s": 3.0}) as d:
        local = d.adapter("local")
        job = d.submit({"name": "deadman", "run": FAKE_JOB, "env": {"STEPS": "600", "EVERY": "100", "STEP_S": "0.02"},
                        "resources": {"gpu": "T4"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "0.5s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None)
        [a1] = d.attempts(job)
        inst = InstanceDir(local.instances_dir / a1.instance_id)
        assert (inst.run_dir / "heartbeat").exists()  # the daemon's heartbeats

        # The daemon goes silent. After 3 s the agent checkpoints, hands off and shuts the instance down.
        gone = wait_until(lambda: (m := inst.observe()).state != InstanceState.RUNNING and m,
                          timeout_s=30, what="the shutdown")
        assert (gone.state, gone.state_reason) == (InstanceState.TERMINATED, "shutdown-by-agent")
        st = read_status(inst.run_dir)
        assert st.notice_reason == "heartbeat" and st.final_done and st.final_checkpoint == st.last_checkpoint

        # Back: attempt 1 is closed, attempt 2 resumes from the final checkpoint, the job completes.
        d.until_terminal(job)
        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.LOST and "shutdown-by-agent" in a1.message
        assert a2.resumed_from == st.final_checkpoint and a2.reason == TerminationReason.SUCCEEDED
        # Lost: from the final checkpoint to the shutdown the instance reported.
        assert a1.lost_work_s == pytest.approx(gone.ended_at.timestamp() - st.last_checkpoint_at, abs=1e-3)
        assert d.status(job) == JobStatus.SUCCEEDED
        wait_until(lambda: not [i for i in local.list_managed() if i.state.alive], what="no instance left")
