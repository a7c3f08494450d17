"""A real ``gpuorch daemon`` killed (SIGKILL) while making a volume job's first launch on RunPod, at
``volume.created`` (the network volume made, nothing recorded: the hardest of the volume's crash
points, ``volume.intent`` before it and ``launch.called`` after it; one is run to keep the suite's
time), then restarted: one network volume (found again by its name), one pod for the attempt that
names it, and no orphan. The crashing daemon is a subprocess (``gpuorch.testing.crash.kill_at``)
against the fake RunPod API served from this test process; the restart is the assembled daemon on
the same home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runpod import FakeRunpod

from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.runpod, pytest.mark.chaos, pytest.mark.timeout(300)]


def test_a_daemon_killed_while_making_a_jobs_volume_converges_on_one_volume_and_one_pod(
        tmp_path: Path, fake: FakeRunpod) -> None:
    home = tmp_path / "home"
    config = {"providers": {"runpod": {"api_url": fake.url, "clouds": ["secure"], "volume_data_center": "EU-RO-1"}},
              "lease_s": 2, "max_sleep_s": 0.5, "metrics": {"enabled": False}}
    with AssembledDaemon.start(home, config) as d:
        job = d.submit({"name": "ft", "run": "true", "resources": {"gpu": "RTX4090:1"}, "spot_policy": "on-demand",
                        "volume": {"size": "10GB", "mount": "/data"}})
    kill_at(home, config, "volume.created")
    made_before_restart = len(fake.volumes)

    with AssembledDaemon.start(home, config) as d:
        attempt = d.until(lambda: (a := [x for x in d.attempts(job) if x.instance_id]) and
                          a[-1].instance_id in fake.pods and a[-1],
                          what="the restarted daemon to record the attempt's pod")
        for _ in range(3):  # a few more passes: nothing new may be made
            d.run_pass()
        assert d.job(job).volume_id in fake.volumes
    [vol] = fake.volumes.values()
    [pod] = fake.pods.values()
    assert pod.id == attempt.instance_id and pod.body["networkVolumeId"] == vol.id
    assert made_before_restart == 1, "the volume the first life made is the one kept"
