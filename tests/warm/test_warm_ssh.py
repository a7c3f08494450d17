"""Warm instances on an SSH runner (issue 35, item 1): the assembled daemon on Lambda (the fake
Lambda API; each instance a real sshd playing the VM, tests/warm/lambda_machines.py).

- Two trials of a sweep run back to back on one instance, with one launch: the second trial's
  agent starts in a fresh run directory (its workdir uploaded again, nothing of the first left),
  and the first run directory is set aside over SFTP.
- The idle time is billed and counted: ``gpuorch cost`` and the sweep's table include it.
- The daemon dies while the instance idles: no heartbeat reaches the instance any more, and its
  idle watcher runs the instance's shutdown command after ``heartbeat_timeout_s`` (the stand-in
  ends the instance at the cloud); a daemon started again then closes the idle period.
- A preemption notice that only the instance hears (its metadata, played by a ``file`` notice
  source: the cloud's listing says nothing) comes while it idles: the idle watcher reports it,
  the daemon releases the instance (terminated, an event), and the trial that was waiting for it
  launches a new instance instead.

"Dies": the in-process daemon makes no further pass, so nothing more reaches the instance (no
heartbeat, no SSH), exactly what an instance sees of a SIGKILLed ``gpuorch daemon``. A real daemon
subprocess cannot be used here: the fake's machines are reached through the provider's
``runner_options`` hook, which only an in-process daemon can be given.
"""

from __future__ import annotations

import getpass
import json
import secrets
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from lambda_machines import KEY, FakeLambda, Machines
from sqlmodel import select

from gpuorch.api.client import Client
from gpuorch.api.server import ApiThread
from gpuorch.money.cost import attempt_cost
from gpuorch.money.report import cost_report
from gpuorch.ops.config import ApiConfig
from gpuorch.store.models import Job, JobStatus, WarmInstance
from gpuorch.sweeps.report import sweep_report
from gpuorch.testing import wait_until
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events
from gpuorch.warm.ledger import idle_cost
from gpuorch.warm.status import open_periods

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


def check_costs(d: AssembledDaemon, sweep_id: int) -> float:
    """`gpuorch cost` and the sweep's table count the idle time, billed to the trial that left it
    warm, on top of the attempts; the idle USD."""
    now = d.rec.clock.now()
    idle_usd = sum(idle_cost(w, now) for w in warm_rows(d))
    with d.store.read() as s:
        by_job = cost_report(s, None, now, "job")
        table = sweep_report(s, d.sweep(sweep_id), now)
    assert by_job["idle"] == pytest.approx(idle_usd, abs=1e-6)
    attempts = sum(attempt_cost(a, now) for j in trials(d, sweep_id) for a in d.attempts(j.id or 0))
    assert by_job["total"] == pytest.approx(attempts + idle_usd, abs=1e-6)
    assert table["spend"]["idle"] == pytest.approx(idle_usd, abs=1e-6)
    assert table["spent"] == pytest.approx(by_job["total"], abs=1e-6)
    assert sum(t["idle_cost"] for t in table["trials"]) == pytest.approx(idle_usd, abs=1e-6)
    return idle_usd


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
        # The first idle period's watcher stood down when trial 2's agent started there.
        assert "idle watcher done: taken" in (runs.parent / "idle.log").read_text()
        wait_until(lambda: [p.name.split("-")[:2] for p in runs.iterdir()] == [["1", str(done[1].id)]],
                   timeout_s=30, what="the older run directory removed")
        # Nothing queued fits it any more: released at once, and it is no longer billing.
        until(d, machines, lambda: all(w.ended_at is not None for w in warm_rows(d)), "the release")
        assert not fake.live()
        assert len(warm_rows(d)) == 2  # leased by trial 2 in the pass it went idle; then released
        check_costs(d, sweep_id)


def hold(d: AssembledDaemon, job: Job, hours: float = 1.0) -> None:
    """Keep ``job`` from starting (a back-off, as a no-offer retry sets); 0: let it go."""
    with d.store.write() as s:
        row = s.get(Job, job.id)
        assert row is not None
        row.not_before = d.rec.clock.now() + timedelta(hours=hours) if hours else None
        # released, as `gpuorch dev` releases a held box: the daemon keeps the row it leases while
        # only it writes it; unleased, the job is claimed and read afresh
        row.lease_owner, row.lease_expires = None, None


def test_a_dead_daemon_leaves_the_idle_watcher_to_power_the_instance_off(tmp_path, fake, machines):
    out = tmp_path / "out"
    out.mkdir()
    with start(tmp_path / "home", fake, machines) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, out))["id"]
        first, second = trials(d, sweep_id)
        hold(d, second)  # the second trial waits: the first's instance idles, wanted
        w = until(d, machines, lambda: (rows := warm_rows(d)) and rows[0].status == "idle" and rows[0],
                  "the first trial's instance to idle, warm")
        root = machines.remote_root(w.instance_id)
        # `status --json` and the HTTP API list it, with its idle cost so far.
        [shown] = open_periods(d.service, d.rec.clock.now())
        assert (shown["instance_id"], shown["job_id"], shown["provider"]) == (w.instance_id, first.id, "lambda")
        token = secrets.token_urlsafe(16)
        api = ApiThread(d.config.model_copy(update={"api": ApiConfig(token=token, port=0)}), d.store).start()
        try:
            [remote] = Client(api.url, token).warm()
        finally:
            api.stop()
        assert remote["instance_id"] == w.instance_id and remote["idle_usd"] >= 0
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
        assert check_costs(again, sweep_id) > 0  # the idle time until the power-off is billed


def test_a_notice_heard_while_idle_releases_the_instance_and_the_waiting_trial_launches_anew(tmp_path, fake,
                                                                                                 machines):
    out = tmp_path / "out"
    out.mkdir()
    with start(tmp_path / "home", fake, machines) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, out))["id"]
        first, second = trials(d, sweep_id)
        hold(d, second)  # it waits, and it fits the first's instance: kept warm for it
        w = until(d, machines, lambda: (rows := warm_rows(d)) and rows[0].status == "idle" and rows[0],
                  "the first trial's instance to idle, warm")
        root = machines.remote_root(w.instance_id)
        wait_until(lambda: "notice file" in ((root / "idle.log").read_text() if (root / "idle.log").exists() else ""),
                   timeout_s=30, what="the idle watcher, watching the notice")
        d.run_pass()
        assert warm_rows(d)[0].status == "idle"  # no notice yet: kept

        deadline = machines.announce(w.instance_id, 120)  # heard on the instance only: the listing says nothing
        until(d, machines, lambda: warm_rows(d)[0].status == "released", "the release on the reported notice")
        row = warm_rows(d)[0]
        assert row.reason == "a preemption notice came while it was idle"
        assert json.loads((root / "idle.notice").read_text())["deadline"] == pytest.approx(deadline)
        assert w.instance_id not in [i.id for i in fake.live()]  # terminated
        [released] = events(d.store, "warm_released")
        assert released.message.startswith(f"warm instance {w.instance_id} released: a preemption notice")
        assert not events(d.store, "notice")  # no attempt was preempted: only the idle instance went

        hold(d, second, 0)  # the waiting trial runs now: on a new instance, not the released one
        until(d, machines, lambda: d.status(second.id or 0).terminal, "the second trial to end")
        assert d.status(second.id or 0) == JobStatus.SUCCEEDED, d.job(second.id or 0).message
        assert len(fake.launches) == 2 and not events(d.store, "warm_reused")
        assert w.instance_id not in {a.instance_id for a in d.attempts(second.id or 0)}
        assert d.status(first.id or 0) == JobStatus.SUCCEEDED
