"""A daemon killed (SIGKILL) at each launch crash point, then restarted, leaves one pod for the
attempt and no orphan: the attempt row is written before the create, the pod is named by the
client token (a relaunch adopts it: 409), and its labels let the sweep find what no attempt owns.

The crash is a real daemon subprocess with ``$GPUORCH_CRASHPOINTS`` (``gpuorch.testing.crash.kill_at``);
the restart is the assembled daemon on the same home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod, Service

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


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_crash_at_a_launch_point_of_a_gang_then_a_restart_leaves_one_gang(tmp_path: Path, point: str) -> None:
    """``nodes: 2``: the restart converges to the attempt's one gang, its two pods and one headless
    Service, all named by the client token, and nothing that no attempt owns."""
    home = tmp_path / "home"
    with cluster(tmp_path) as k8s:
        config = {"providers": {"kubernetes": k8s.options()}, "lease_s": 3, "max_sleep_s": 1}
        with AssembledDaemon.start(home, config) as d:
            job = d.submit({"name": "gang", "run": "sleep 120", "nodes": 2, "resources": {"gpu": "A100:80GB:1"}})
        kill_at(home, config, point, timeout_s=180)

        with AssembledDaemon.start(home, config) as d:
            k8s_adapter = d.adapter("kubernetes")
            d.until(lambda: (a := d.attempts(job)) and a[-1].instance_id and
                    k8s_adapter.get(a[-1].instance_id).state.value == "running",
                    timeout_s=120, what="the restarted daemon's gang to run")
            d.run_pass()
            mine = {"gpuorch.dev/job": str(job)}
            client = k8s.client()
            live = [a for a in d.attempts(job) if a.instance_id]
            assert len(live) == 1, [(a.number, a.instance_id, a.reason) for a in d.attempts(job)]
            token = live[0].instance_id.split(":", 1)[1]
            assert sorted(p.metadata.name for p in client.list(Pod, labels=mine)) == [token, f"{token}-n1"]
            assert [s.metadata.name for s in client.list(Service, labels=mine)] == [token]
            assert [i.id for i in k8s_adapter.list_managed() if i.state.alive] == [live[0].instance_id]
