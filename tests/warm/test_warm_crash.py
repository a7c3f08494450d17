"""A real ``gpuorch daemon`` SIGKILLed between one trial's end and the next trial's start on the
warm instance (issue 35, item 1), then restarted: both trials succeed, no two jobs ever ran on one
instance at once, and nothing is left running.

The kill points: ``end.recorded`` (the first trial's End committed, its instance not yet handed to
the pool: the orphan sweep terminates it, the next trial launches its own), ``warm.kept`` (handed
over, not yet recycled) and ``warm.leased`` (the next trial's attempt recorded on it, its agent not
yet started). The restart is the assembled daemon on the same home and config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sqlmodel import select

from gpuorch.store.models import Attempt, Job, JobStatus, WarmInstance
from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

# lease_s: the killed daemon's claim lapses in 2 s, not the default minute, before the restart takes over.
CONFIG = {"lease_s": 2, "max_sleep_s": 0.5, "metrics": {"enabled": False}}


@pytest.mark.parametrize("point", ["end.recorded", "warm.kept", "warm.leased"])
def test_a_crash_between_a_trials_end_and_the_next_on_its_warm_instance_converges(point: str, tmp_path: Path):
    home = tmp_path / "home"
    job = {"run": "true", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "keep_warm": "10m"}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "crash", "parameters": {"S": [1, 2]}, "max_parallel": 1, "job": job}))
    with AssembledDaemon.start(home, CONFIG) as d:
        sweep_id = d.submit_sweep(path)["id"]
    kill_at(home, CONFIG, point)

    with AssembledDaemon.start(home, CONFIG) as d:
        def trials() -> list[Job]:
            with d.store.read() as s:
                return list(s.exec(select(Job).where(Job.sweep_id == sweep_id)))

        d.until(lambda: all(j.status.terminal for j in trials()), what="both trials to end")
        assert [j.status for j in trials()] == [JobStatus.SUCCEEDED] * 2, [(j.status, j.message) for j in trials()]
        d.until(lambda: not [i for i in d.provider("local").list_managed() if i.state.alive],
                what="every instance to be terminated (no orphan, the warm one released)")
        with d.store.read() as s:
            attempts = [a for a in s.exec(select(Attempt)) if a.instance_id]
            periods = list(s.exec(select(WarmInstance)))
    assert all(w.ended_at is not None for w in periods)
    # Never two jobs on one instance: the attempts that ran on one instance do not overlap in time.
    by_instance: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_instance.setdefault(a.instance_id or "", []).append(a)
    for runs in by_instance.values():
        runs.sort(key=lambda a: a.launched_at)  # type: ignore[arg-type, return-value]
        for before, after in zip(runs, runs[1:], strict=False):
            assert before.ended_at is not None and before.ended_at <= after.launched_at, runs
