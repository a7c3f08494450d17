"""What a job writes back is bounded, through the daemon ``gpuorch daemon`` builds (issue 31).
Before, a 50 MB ``result.json`` went into the job row (``status --json`` 52 MB, the dashboard page
17.8 s), and a 100,000-deep JSON result crashed the agent, so a job that exited 0 was marked
failed. Now the job succeeds, its result says it was dropped and why, and an event says so."""

from __future__ import annotations

import json

import pytest

from gpuorch.agent import limits
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = pytest.mark.timeout(300)


def _job(run, name="res"):
    return {"name": name, "run": run, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"}


def test_a_50_mb_result_is_dropped_for_size_and_the_job_still_succeeds(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        # 50 MiB of a valid JSON string: only its size is wrong
        job = d.submit(_job('python3 -c "import json,os; json.dump({\'blob\': \'x\' * (50 << 20)}, '
                            'open(os.environ[\'GPUORCH_RESULT_FILE\'], \'w\'))"'))
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0, d.attempts(job)
        assert done.result is not None and len(done.result) < 1024  # the row holds the note, not 50 MB
        result = json.loads(done.result)
        assert result["dropped"] == "size" and result["limit_bytes"] == limits.RESULT_MAX_BYTES
        assert result["bytes"] > 50 << 20
        [msg] = [e.message for e in events(d.store, "result_dropped", job)]
        assert msg.startswith("result.json is 50 MiB, over the 64 KiB limit; ")
        assert msg.endswith("write large outputs to the checkpoint store or a volume")
        assert msg == result["message"]
        shown = d.service.jobs()
        assert len(json.dumps(shown, default=str)) < 64 * 1024  # what status --json prints stays small


def test_a_100000_deep_json_result_is_dropped_for_depth_and_the_job_still_succeeds(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit(_job('python3 -c "import os; open(os.environ[\'GPUORCH_RESULT_FILE\'], \'w\')'
                            '.write(\'[\' * 100000 + \']\' * 100000)"'))
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0, d.attempts(job)
        result = json.loads(done.result or "")
        assert result["dropped"] == "size"  # 200,000 bytes: the size check comes first
        assert [e.message for e in events(d.store, "result_dropped", job)] == [result["message"]]


def test_a_deep_result_within_the_size_is_dropped_for_depth(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit(_job('python3 -c "import os; open(os.environ[\'GPUORCH_RESULT_FILE\'], \'w\')'
                            '.write(\'[\' * 20000 + \']\' * 20000)"'))
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        result = json.loads(done.result or "")
        assert result["dropped"] == "depth" and "deeper than 32 levels" in result["message"]
        assert [e.message for e in events(d.store, "result_dropped", job)] == [result["message"]]


def test_a_small_result_is_kept_as_written_with_no_event(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit(_job("echo '{\"acc\": 0.91, \"loss\": NaN}' > \"$GPUORCH_RESULT_FILE\""))
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED
        assert json.loads(done.result or "") == {"acc": 0.91, "loss": None}  # every number finite
        assert [e.message for e in events(d.store, "result_dropped", job)] == []


def test_metrics_lines_over_the_limits_are_skipped_and_the_rest_recorded(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        run = ('python3 -c "import json,os; f=open(os.environ[\'GPUORCH_METRICS_FILE\'], \'w\'); '
               'f.write(json.dumps({\'step\': 1, \'loss\': 2.0}) + chr(10)); '
               'f.write(\'[\' * 100000 + chr(10)); '
               'f.write(json.dumps({\'step\': 2, \'big\': \'x\' * 20000}) + chr(10)); '
               'f.write(json.dumps({\'step\': 3, \'loss\': 1.0}) + chr(10)); f.close()"')
        job = d.submit(_job(run, "metrics"))
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        d.until(lambda: d.job(job).metrics and json.loads(d.job(job).metrics).get("step") == 3,
                what="the metrics to be read")
        assert json.loads(d.job(job).metrics or "") == {"step": 3, "loss": 1.0}
