"""LocalRunner's parts of the money and sweep features: metrics reads and the clean stop."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuorch.agent.protocol import STOP_FILE, AgentConfig
from gpuorch.provider.port import LaunchRequest
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.testing import wait_until
from gpuorch_local import LocalProvider, LocalRunner


@pytest.fixture
def provider(tmp_path: Path):
    p = LocalProvider(tmp_path / "local")
    yield p
    for inst in p.list_managed():
        p.terminate(inst.id)


def launched(p: LocalProvider):
    offer = next(o for o in p.offers() if o.instance_type == "local.t4.1")
    inst = p.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False))
    runner = p.runner(inst)
    assert isinstance(runner, LocalRunner)
    return inst, runner


def test_read_metrics_reads_the_jobs_metrics_file_from_an_offset(provider):
    _, runner = launched(provider)
    assert runner.read_metrics() == (b"", 0)  # no agent, no file yet
    runner.start(AgentConfig(job_id=1, attempt=1, job_name="t", run=(
        'echo \'{"step": 1, "loss": 2.5}\' >> "$GPUORCH_METRICS_FILE"; '
        'echo \'{"step": 2, "loss": 1.5}\' >> "$GPUORCH_METRICS_FILE"')))
    wait_until(lambda: (s := runner.status()) is not None and s.state == "exited", timeout_s=10, what="the job")
    data, end = runner.read_metrics()
    assert [json.loads(line)["loss"] for line in data.splitlines()] == [2.5, 1.5]
    first = data.index(b"\n") + 1
    assert runner.read_metrics(first) == (data[first:], end)


def test_request_stop_stops_the_job_by_its_deadline(provider):
    _, runner = launched(provider)
    with pytest.raises(RunnerUnavailable):  # no agent to ask yet
        runner.request_stop(time.time() + 10)
    runner.start(AgentConfig(job_id=1, attempt=1, job_name="t", run="trap '' USR1; sleep 60",
                             final_checkpoint_grace_s=1.0))
    wait_until(lambda: (s := runner.status()) is not None and s.state == "running", timeout_s=10, what="the job")
    deadline = time.time() + 3
    runner.request_stop(deadline)
    runner.request_stop(deadline + 100)  # the first deadline stands
    assert json.loads((runner.rundir / STOP_FILE).read_text()) == {"deadline": deadline}
    st = wait_until(lambda: (s := runner.status()) is not None and s.state == "exited" and s, timeout_s=15,
                    what="the stop")
    assert (st.notice_reason, st.final_done, st.exit_code) == ("stop", True, 143)
