"""A daemon killed (SIGKILL) at each launch crash point, then restarted, leaves one pod for the
attempt and no orphan: the attempt row is written before the create, the pod is named by the
client token (a relaunch adopts it: 409), and its labels let the sweep find what no attempt owns.

The crash is a real daemon subprocess with ``$GPUORCH_CRASHPOINTS`` (``gpuorch.testing.crash.kill_at``);
the restart is the assembled daemon on the same home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod

from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_crash_at_a_launch_point_then_a_restart_leaves_one_pod(tmp_path: Path, point: str) -> None:
    home = tmp_path / "home"
    with cluster(tmp_path) as k8s:
        # A short lease: the restarted daemon takes over the crashed one's jobs once it expires.
        config = {"providers": {"kubernetes": k8s.options()}, "lease_s": 3, "max_sleep_s": 1}
        with AssembledDaemon.start(home, config) as d:
            job = d.submit({"name": "crash", "run": "sleep 120", "resources": {"gpu": "A100:80GB:1"}})
        kill_at(home, config, point, timeout_s=180)

        with AssembledDaemon.start(home, config) as d:
            d.until(lambda: (a := d.attempts(job)) and a[-1].instance_id and
                    d.adapter("kubernetes").get(a[-1].instance_id).state.value == "running",
                    timeout_s=120, what="the restarted daemon's pod to run")
            d.run_pass()
            pods = [p for p in k8s.client().list(Pod, labels={"gpuorch.dev/job": str(job)})]
            live = [a for a in d.attempts(job) if a.instance_id]
            assert len(pods) == 1 and [a.instance_id for a in live] == [f"kmock:{pods[0].metadata.name}"]
            assert [i.id for i in d.adapter("kubernetes").list_managed() if i.state.alive] == [live[0].instance_id]
