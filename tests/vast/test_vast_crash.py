"""A real ``gpuorch daemon`` (a subprocess, as systemd runs it) renting on the fake Vast API, SIGKILLed at
each crash point of a launch
(``gpuorch.ops.crashpoints``: ``launch.intent``, ``launch.called`` - the instance rented, nothing
recorded - and ``launch.recorded``), then started again: the label it carries finds the instance
again, so the account ends with exactly one instance for the attempt and none without an attempt.

The crashing daemon: ``gpuorch.testing.crash.kill_at``; the restart: the assembled daemon on the same
home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_vast import KEY, FakeVastServer, market

from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.vast, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_daemon_killed_at_a_launch_crash_point_converges_to_one_instance(
        tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", KEY)  # the daemon's key, in the crashing child and the restart alike
    server = FakeVastServer()
    fake = server.fake
    fake.add(*market())
    home = tmp_path / "home"
    # lease_s: the killed daemon's lease lapses in 2 s, not the default minute, before the next takes over.
    config = {"providers": {"vast": {"server_url": fake.url}}, "lease_s": 2, "max_sleep_s": 0.5,
              "metrics": {"enabled": False}}
    try:
        with AssembledDaemon.start(home, config) as d:
            job = d.submit({"name": "crash", "run": "sleep 600", "resources": {"gpu": "RTX4090:1"},
                            "spot_policy": "on-demand", "providers": ["vast"]})
        kill_at(home, config, point)
        with AssembledDaemon.start(home, config) as d:
            d.until(lambda: any(a.instance_id for a in d.attempts(job)),
                    what="the restarted daemon to record the attempt's instance")
            for _ in range(3):  # more passes: the orphan sweep and the launches have had their turn
                d.run_pass()
            attempts = [a for a in d.attempts(job) if a.instance_id]
            labels = {str(iid): r["label"] for iid, r in fake.instances.items()}
            assert len(labels) == 1, labels  # no duplicate rental
            assert {a.instance_id for a in attempts} == set(labels)  # no orphan: each instance has its attempt
            assert [a.number for a in attempts] == [1] and next(iter(labels.values())).endswith(f"-{job}-1")
    finally:
        server.close()
