"""A real ``gpuorch daemon`` killed (SIGKILL) at each crash point of a RunPod launch, then
restarted: one pod for the attempt, found again by its name (the client token), and no orphan.

The daemon is a subprocess (``tests/ops/daemon_proc.py``) whose config names the fake RunPod API
served from this test process; crash points: ``gpuorch/ops/crashpoints.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_runpod import FakeRunpod
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.crashpoints import ENV as CRASH_ENV
from gpuorch.ops.crashpoints import LOG_ENV as CRASH_LOG_ENV
from gpuorch.provider import client_token
from gpuorch.store import Store
from gpuorch.store.models import Attempt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from daemon_proc import DaemonProcess, wait_until  # noqa: E402

pytestmark = [pytest.mark.runpod, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_daemon_killed_at_a_launch_crash_point_converges_on_one_pod(point: str, tmp_path: Path,
                                                                      fake: FakeRunpod) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = Store(f"sqlite:///{home / 'state.db'}")
    job = jobs.submit(store, parse_spec({"name": "ft", "run": "true", "resources": {"gpu": "RTX4090:1"},
                                         "spot_policy": "on-demand"}), utcnow()).id
    config = (f"providers: {{runpod: {{api_url: '{fake.url}', clouds: [community]}}}}\n"
              "poll_s: 0.2\nmax_sleep_s: 0.5\nlease_s: 2\nmetrics: {enabled: false}\n")
    crashes = tmp_path / "crashes.log"
    first = DaemonProcess(home, "first", config, env={CRASH_ENV: f"{point}=1", CRASH_LOG_ENV: str(crashes)})
    try:
        assert first.proc.wait(120) == -9, first.log_path.read_text()[-2000:]
    finally:
        first.close()
    assert crashes.read_text().split()[-1] == point
    created_before_restart = len(fake.pods)

    def recorded() -> Attempt | None:
        with store.read() as s:
            rows = [a for a in s.exec(select(Attempt).where(Attempt.job_id == job)) if a.instance_id]
        return rows[-1] if rows and rows[-1].instance_id in fake.pods else None

    second = DaemonProcess(home, "second", config)
    try:
        attempt = wait_until(recorded, timeout=120, what="the restarted daemon to record the attempt's pod")
        looks = fake.calls.count("myself")  # a few more passes (each lists the pods): nothing new may be created
        wait_until(lambda: fake.calls.count("myself") >= looks + 2, timeout=120, what="two more passes")
    finally:
        second.close()  # SIGKILL again: what is left is what the pod list says
    assert isinstance(attempt, Attempt)
    [pod] = fake.pods.values()  # one pod, and no orphan beside it
    assert pod.id == attempt.instance_id
    assert pod.body["name"] == client_token(job, attempt.number, store.installation_id)
    if point in ("launch.called", "launch.recorded"):
        assert created_before_restart == 1, "the pod the first life created is the one kept"
