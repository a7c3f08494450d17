"""A real ``gpuorch daemon`` killed (SIGKILL) at each crash point of a Lambda launch, then
restarted: one instance for the attempt, found again by its name (the client token), and no
orphan beside it.

The crashing daemon is a subprocess (``gpuorch.testing.crash.kill_at``) whose config names the fake
Lambda API served from this test process (its key in ``$LAMBDA_API_KEY``, from conftest); the
restart is the assembled daemon on the same home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_lambda import FakeLambda

from gpuorch.provider import client_token
from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.lambdalabs, pytest.mark.chaos, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded"])
def test_a_daemon_killed_at_a_launch_crash_point_converges_on_one_instance(point: str, tmp_path: Path,
                                                                           fake: FakeLambda) -> None:
    home = tmp_path / "home"
    # lease_s: the killed daemon's claim lapses in 2 s, not the default minute, before the restart takes over.
    config = {"providers": {"lambda": {"endpoint": fake.url}}, "lease_s": 2, "max_sleep_s": 0.5,
              "metrics": {"enabled": False}}
    with AssembledDaemon.start(home, config) as d:
        job = d.submit({"name": "ft", "run": "true", "resources": {"gpu": "A10:1"}, "spot_policy": "on-demand"})
        owner = d.store.installation_id
    kill_at(home, config, point)
    created_before_restart = len(fake.instances)

    with AssembledDaemon.start(home, config) as d:
        attempt = d.until(lambda: (a := [x for x in d.attempts(job) if x.instance_id]) and
                          a[-1].instance_id in fake.instances and a[-1],
                          what="the restarted daemon to record the attempt's instance")
        for _ in range(3):  # a few more passes: nothing new may be launched
            d.run_pass()
    [inst] = fake.instances.values()  # one instance, and no orphan beside it
    assert inst.id == attempt.instance_id
    assert inst.name == client_token(job, attempt.number, owner)
    if point in ("launch.called", "launch.recorded"):
        assert created_before_restart == 1, "the instance the first life launched is the one kept"
