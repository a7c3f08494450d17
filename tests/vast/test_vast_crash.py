"""A real ``gpuorch daemon`` (a subprocess, as systemd runs it) renting on the fake Vast API, SIGKILLed at
each crash point of a launch
(``gpuorch.ops.crashpoints``: ``launch.intent``, ``launch.called`` - the instance rented, nothing
recorded - and ``launch.recorded``), then started again: the label it carries finds the instance
again, so the account ends with exactly one instance for the attempt and none without an attempt."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_vast import KEY, FakeVastServer, market
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.crashpoints import ENV as CRASH_ENV
from gpuorch.ops.crashpoints import LOG_ENV as CRASH_LOG_ENV
from gpuorch.store import Store
from gpuorch.store.models import Attempt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from daemon_proc import DaemonProcess, wait_until  # noqa: E402

pytestmark = [pytest.mark.vast, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_daemon_killed_at_a_launch_crash_point_converges_to_one_instance(tmp_path: Path, point: str) -> None:
    server = FakeVastServer()
    fake = server.fake
    fake.add(*market())
    home = tmp_path / "home"
    home.mkdir()
    # lease_s: the killed daemon's lease lapses in 2 s, not the default minute, before the next takes over.
    config = (f"providers: {{vast: {{server_url: '{fake.url}'}}}}\npoll_s: 0.2\nmax_sleep_s: 0.5\nlease_s: 2\n"
              "metrics: {enabled: false}\n")
    store = Store(f"sqlite:///{home / 'state.db'}")
    job = jobs.submit(store, parse_spec({"name": "crash", "run": "sleep 600", "resources": {"gpu": "RTX4090:1"},
                                         "spot_policy": "on-demand", "providers": ["vast"]}), utcnow()).id
    crashes = tmp_path / "crashes.log"
    env = {"VAST_API_KEY": KEY}

    def recorded() -> list[Attempt]:
        with store.read() as s:
            return [a for a in s.exec(select(Attempt).where(Attempt.job_id == job)).all() if a.instance_id]

    try:
        first = DaemonProcess(home, "first", config, env={**env, CRASH_ENV: f"{point}=1", CRASH_LOG_ENV: str(crashes)})
        try:
            assert first.proc.wait(120) == -9  # SIGKILLed at that point of the attempt's launch
        finally:
            first.close()
        assert crashes.read_text().split()[-1] == point
        second = DaemonProcess(home, "second", config, env=env)
        try:
            wait_until(recorded, what="the restarted daemon to record the attempt's instance")
            second.passes(3)  # more passes: the orphan sweep and the launches have had their turn
            attempts = recorded()
            labels = {str(iid): r["label"] for iid, r in fake.instances.items()}
            assert len(labels) == 1, labels  # no duplicate rental
            assert {a.instance_id for a in attempts} == set(labels)  # no orphan: each instance has its attempt
            assert [a.number for a in attempts] == [1] and next(iter(labels.values())).endswith(f"-{job}-1")
        finally:
            second.close()
    finally:
        server.close()
