"""Chaos: a simulated night of 30 jobs on a stormy stretch of real spot traces (dozens of
preemptions, with and without notice), while the real daemon is SIGKILLed at 50+ random points -
at named crash points inside a pass (launch.called: the instance exists, nothing records it) and
at random times - and restarted each time. With 20% of the sim's calls failing on top.

Checked after every kill and while the morning daemon runs: never two live attempts for one job,
never two live instances for one attempt, no instance billing for long without an attempt that
owns it. The seed (printed; ``GPUORCH_CHAOS_SEED`` replays its choices) drives every random
choice of the test. At the end: the sim's billed intervals match the attempts' costs, and
every job finished exactly once with the right result, every relaunch resumed from the latest
complete checkpoint, no instance and no process left running.
"""

from __future__ import annotations

import os
import random
import time

import pytest
from night import Night, summary

KILLS = 52
WAVES = {0: 10, 12: 10, 24: 10}  # kill number -> jobs submitted then


@pytest.mark.chaos
@pytest.mark.timeout(420)
def test_a_night_of_preemptions_and_daemon_kills(tmp_path):
    seed = int(os.environ.get("GPUORCH_CHAOS_SEED", random.randrange(1 << 20)))
    print(f"chaos seed {seed} (rerun with GPUORCH_CHAOS_SEED={seed})")
    night = Night(tmp_path / "home", random.Random(seed), faults=0.2)
    started = time.monotonic()
    try:
        for kill in range(KILLS):
            if kill in WAVES:
                night.submit(WAVES[kill])
            night.life(after_start_s=night.rng.uniform(0.2, 2.0))
            night.check_now()
            print(f"{time.monotonic() - started:6.1f}s after kill {kill + 1}: {summary(night)}")
        night.start(crash=False)  # the morning: a daemon left alone finishes what is left
        deadline = time.monotonic() + 150
        while not (night.all_done() and not night.live_instances()) and time.monotonic() < deadline:
            night.check_now()
            time.sleep(0.5)
        night.stop()
        print(f"{time.monotonic() - started:6.1f}s done: {summary(night)}")
        points = night.crash_points()
        print(f"crash points hit: {dict(points)}")
        stats = night.check_end()
        print(f"stats: {stats}")
        print(f"money: {night.check_money()}")
        assert sum(night.kills.values()) >= 50 and night.kills["sigkill"] and points
        assert points["launch.called"] >= 1  # killed between "launch requested" and "launch recorded"
        # How many depends on how fast jobs progress between kills: 30-55 preemptions and 10-20
        # resumes from a checkpoint on a quiet 2-core box, as few as 14 and 0 on one loaded by
        # other test runs. That the night was stormy is the point, not the figure; the checks
        # above hold on every run.
        assert stats["preemptions"] >= 10 and stats["ended_no_capacity"] + stats["preemptions"] >= 30
    finally:
        night.cleanup()
