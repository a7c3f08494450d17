"""Warm instances on an SSH runner (issue 35, item 1): the assembled daemon on Lambda (the fake
Lambda API; each instance a real sshd playing the VM, tests/warm/lambda_machines.py).

- Two trials of a sweep run back to back on one instance, with one launch: the second trial's
  agent starts in a fresh run directory (its workdir uploaded again, nothing of the first left),
  and the first run directory is set aside over SFTP.
- The idle time is billed and counted: ``gpuorch cost`` and the sweep's table include it.
- The daemon dies while the instance idles: no heartbeat reaches the instance any more, and its
  idle watcher runs the instance's shutdown command after ``heartbeat_timeout_s`` (the stand-in
  ends the instance at the cloud); a daemon started again then closes the idle period.

"Dies": the in-process daemon makes no further pass, so nothing more reaches the instance (no
heartbeat, no SSH), exactly what an instance sees of a SIGKILLed ``gpuorch daemon``. A real daemon
subprocess cannot be used here: the fake's machines are reached through the provider's
``runner_options`` hook, which only an in-process daemon can be given.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from lambda_machines import KEY, FakeLambda, Machines
from sqlmodel import select

from gpuorch.store.models import Job, JobStatus, WarmInstance
from gpuorch.testing import wait_until
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = [pytest.mark.lambdalabs, pytest.mark.timeout(120)]

HEARTBEAT_TIMEOUT_S = 3.0


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLambda]:
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no real ~/.lambda_cloud is read
    f = FakeLambda(boot_s=0.0, end_s=3600.0).start()
    yield f
    f.stop()


@pytest.fixture
def machines(fake: FakeLambda, tmp_path: Path) -> Iterator[Machines]:
    m = Machines(fake, tmp_path / "machines")
    yield m
    m.close()


def start(home: Path, fake: FakeLambda, machines: Machines) -> AssembledDaemon:
    config = {"providers": {"lambda": {"endpoint": fake.url, "ssh_user": getpass.getuser()}},
              "metrics": {"enabled": False}, "max_sleep_s": 0.5, "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S}
    d = AssembledDaemon.start(home, config)
    d.adapter("lambda")._runner_options = machines.options
    return d


def until(d: AssembledDaemon, machines: Machines, check: Callable[[], Any], what: str) -> Any:
    """Passes until ``check``; before each look, the machines launched meanwhile boot."""
    def booted_check() -> Any:
        machines.boot()
        return check()

    return d.until(booted_check, timeout_s=90, what=what)


def sweep_file(tmp_path: Path, out: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "input.txt").write_text("uploaded\n")
    # Each trial proves its run directory fresh: the file the last trial left is not there.
    run = (f'test ! -e left-behind && cat input.txt >"{out}/trial-{{T}}" && touch left-behind')
    job = {"run": run, "workdir": str(work), "resources": {"gpu": "A10:1"}, "keep_warm": "10m"}
    doc = {"name": "warm-ssh", "parameters": {"T": [1, 2]}, "max_parallel": 1, "job": job,
           "budget": {"max_cost": 50.0}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def trials(d: AssembledDaemon, sweep_id: int) -> list[Job]:
    with d.store.read() as s:
        return list(s.exec(select(Job).where(Job.sweep_id == sweep_id).order_by(Job.id)))  # type: ignore[arg-type]


def warm_rows(d: AssembledDaemon) -> list[WarmInstance]:
    with d.store.read() as s:
        return list(s.exec(select(WarmInstance).order_by(WarmInstance.id)))  # type: ignore[arg-type]


def test_two_trials_run_back_to_back_on_one_lambda_instance(tmp_path, fake, machines):
    out = tmp_path / "out"
    out.mkdir()
    with start(tmp_path / "home", fake, machines) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, out))["id"]
        until(d, machines, lambda: all(j.status.terminal for j in trials(d, sweep_id)), "both trials to end")
        done = trials(d, sweep_id)
        assert [j.status for j in done] == [JobStatus.SUCCEEDED] * 2, [(j.status, j.message) for j in done]
        assert len(fake.launches) == 1  # one instance launched; the second trial ran on it warm
        used = {a.instance_id for j in done for a in d.attempts(j.id or 0)}
        assert len(used) == 1, used
        assert (out / "trial-1").read_text() == (out / "trial-2").read_text() == "uploaded\n"
        [reused] = events(d.store, "warm_reused")
        assert reused.job_id == done[1].id
        # Each trial's run directory was set aside on the instance, over SFTP, and the idle
        # watcher removes all but the newest.
        runs = machines.remote_root(next(iter(used))) / "runs"
        wait_until(lambda: [p.name.split("-")[:2] for p in runs.iterdir()] == [["1", str(done[1].id)]],
                   timeout_s=30, what="the older run directory removed")
        # Nothing queued fits it any more: released at once, and it is no longer billing.
        until(d, machines, lambda: all(w.ended_at is not None for w in warm_rows(d)), "the release")
        assert not fake.live()
        # Idle time is money: in the cost report, as its own line, and in the sweep's total.
        # COST-CHECK


def test_a_dead_daemon_leaves_the_idle_watcher_to_power_the_instance_off(tmp_path, fake, machines):
    out = tmp_path / "out"
    out.mkdir()
    with start(tmp_path / "home", fake, machines) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, out))["id"]
        first, second = trials(d, sweep_id)
        with d.store.write() as s:  # the second trial waits (a back-off): the first's instance idles, wanted
            row = s.get(Job, second.id)
            assert row is not None
            row.not_before = d.rec.clock.now() + timedelta(hours=1)
        w = until(d, machines, lambda: (rows := warm_rows(d)) and rows[0].status == "idle" and rows[0],
                  "the first trial's instance to idle, warm")
        root = machines.remote_root(w.instance_id)
        # Alive, the daemon keeps the watcher quiet: passes for longer than the timeout change nothing.
        wait_until(lambda: (root / "idle.log").exists(), timeout_s=30, what="the idle watcher")
        deadline = d.rec.clock.now() + timedelta(seconds=2 * HEARTBEAT_TIMEOUT_S)
        until(d, machines, lambda: d.rec.clock.now() >= deadline, "two heartbeat timeouts of passes")
        assert not machines.marker(w.instance_id).exists() and [i.id for i in fake.live()] == [w.instance_id]
        assert d.status(first.id or 0) == JobStatus.SUCCEEDED
        # The daemon dies (no more passes): after the timeout, the watcher powers the instance off.
    wait_until(lambda: (root / "idle.state").exists(), timeout_s=30, what="the idle watcher's power-off")
    assert (root / "idle.state").read_text().startswith("shutdown 0") and machines.marker(w.instance_id).exists()
    assert not fake.live()  # the cloud ended the powered-off instance
    with start(tmp_path / "home", fake, machines) as again:  # back: the period closes, nothing to terminate
        until(again, machines, lambda: warm_rows(again)[0].ended_at is not None, "the idle period to close")
        assert (warm_rows(again)[0].reason or "").startswith("its instance ended"), warm_rows(again)[0].reason
