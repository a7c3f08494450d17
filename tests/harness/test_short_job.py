"""A job that runs and ends between two passes still records when it started.

The daemon marks an attempt running when a pass sees its agent up. A job shorter than a pass
interval is first seen ended: its attempt was left with no ``started_at``, so it read as never
run (the dashboard's timeline, the volume job's "every attempt that ran"). Its end now takes the
start from the agent's status, kept between the launch and the end; its metrics and log are read
at its end as at any pass.

Through the assembled daemon on the embedded default (the local provider).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuorch.agent.protocol import read_status
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.store.models import AttemptStatus, JobStatus
from gpuorch.testing.contract import wait_until
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)


def ended_agents(home: Path) -> list[str]:
    found = [read_status(p.parent) for p in home.rglob("status.json")]
    return [st.state for st in found if st is not None and st.state in ("exited", "failed")]


def test_a_job_first_seen_ended_keeps_when_its_agent_started(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        run = """echo '{"step": 1, "loss": 0.5}' >> "$GPUORCH_METRICS_FILE"; echo done"""
        job = d.submit({"name": "short", "run": run, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        home = tmp_path / "home"
        d.until(lambda: list(home.rglob("agent.json")), what="a pass to start the agent")
        # No pass runs while the job runs and ends: the next one sees it ended.
        wait_until(lambda: ended_agents(home), timeout_s=120, what="the agent to exit")
        assert [a.status for a in d.attempts(job)] == [AttemptStatus.LAUNCHED]
        ended = d.until_terminal(job)
        assert ended.status == JobStatus.SUCCEEDED
        assert json.loads(ended.metrics or "{}") == {"step": 1, "loss": 0.5}  # its metrics, read at its end
        assert LogMirror(d.config.home).path(job, 1).read_text().strip() == "done"  # and its log
        [a] = d.attempts(job)
        assert a.started_at is not None and a.launched_at is not None and a.ended_at is not None
        assert a.launched_at <= a.started_at <= a.ended_at
        assert not [e for e in d.service.events(str(job)) if e["kind"] == "running"]  # no pass saw it up
