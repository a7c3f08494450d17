"""A store with real jobs and a sweep, run through the local provider, and the API (with the
dashboard) served on it from a thread on 127.0.0.1. Built once per session: the runs take seconds.

- ``train``: the tiny NumPy MLP, preempted with notice after its first checkpoint, resumed on
  another zone from the final checkpoint: two attempts for the timeline.
- sweep ``lr``: three trials of the same MLP, each logging its loss every 25 steps: three curves.

Bare Reconciler: the dashboard tests share one store filled once per session with a short poll;
the pages are what is under test.
"""

from __future__ import annotations

import secrets

import pytest
import yaml

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store import Store
from gpuorch.store.heartbeat import Beater
from gpuorch.store.models import Sweep
from gpuorch.sweeps import intent
from gpuorch.sweeps.spec import load_sweep
from gpuorch.testing import e2e
from gpuorch_local.provider import LocalProvider

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
from gpuorch.api.server import ApiThread

ENV = {"STEPS": "150", "CKPT_EVERY": "30", "STEP_SLEEP": "0.01", "LOG_EVERY": "10", "SEED": "3"}


def _job(tmp, name: str, env: dict[str, str]) -> dict:
    return {"name": name, "run": "python3 train.py", "workdir": str(e2e.TINY_MLP), "env": env, "spot_policy": "spot",
            "resources": {"gpu": "A100:80GB:1"}, "checkpoint": {"store": f"file://{tmp / 'ckpt'}", "interval": "1s"}}


@pytest.fixture(scope="session")
def scenario(tmp_path_factory):
    home = tmp_path_factory.mktemp("dash")
    store = Store(f"sqlite:///{home / 'state.db'}")
    local = LocalProvider(home / "local")
    rec = Reconciler(store, {"local": local}, settings=Settings(poll_s=0.2), logs=LogMirror(home))
    beat = Beater(store, rec.owner, 5.0, "test")
    beat.started(utcnow())

    def step() -> None:
        rec.run_pass()
        beat.passed(utcnow(), "ok")

    train = jobs.submit(store, parse_spec(_job(home, "train", {**ENV, "STEPS": "400", "STEP_SLEEP": "0.02"})),
                        rec.clock.now())
    e2e.passes_until(step, lambda: (a := e2e.attempts(store, train.id)) and a[-1].last_checkpoint is not None)
    local.inject_preemption(e2e.attempts(store, train.id)[-1].instance_id, notice_s=15)
    e2e.passes_until(step, lambda: len(e2e.attempts(store, train.id)) == 2)

    doc = {"name": "lr", "max_parallel": 3, "budget": {"max_cost": 1.0}, "objective": {"metric": "loss", "mode": "min"},
           "parameters": {"LR": [0.0001, 0.01, 0.001]}, "job": {k: v for k, v in _job(home, "x", ENV).items()
                                                               if k != "name"}}
    path = home / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    sweep = intent.submit(store, *load_sweep(path, rec.clock.now()), rec.clock.now())

    def done() -> bool:
        with store.read() as s:
            swept = s.get(Sweep, sweep.id).status.value == "done"
        return swept and e2e.job_status(store, train.id).terminal

    e2e.passes_until(step, done)
    token = secrets.token_urlsafe(24)
    api = ApiThread(DaemonConfig(home=home, daily_budget=2.0, api=ApiConfig(token=token, port=0)), store).start()
    try:
        # "beat": a pass's heartbeat now, for a test that shows the daemon as alive however long
        # the module's earlier tests took (its heartbeat counts as alive for a few intervals only)
        yield {"url": api.url, "token": token, "train": train.id, "sweep": sweep.id, "home": home, "store": store,
               "beat": lambda: beat.passed(utcnow(), "ok")}
    finally:
        api.stop()
        rec.release_leases()
        store.close()


@pytest.fixture(scope="session")
def acting(tmp_path_factory):
    """The daemon ``gpuorch daemon`` builds (``AssembledDaemon``: the local provider, passes driven
    by the test) with its API and dashboard on 127.0.0.1, for the actions: ``running()`` submits a
    job that sleeps and returns its id once it runs; ``sweep()`` submits an active two-trial sweep
    (one at a time) and returns its id."""
    from gpuorch.testing.daemon import AssembledDaemon

    home = tmp_path_factory.mktemp("acting")
    token = secrets.token_urlsafe(24)
    # budget_stop_grace_s: a held trial's clean stop within seconds (held_sweep)
    with AssembledDaemon.start(home / "home", {"api": {"token": token, "port": 0}, "budget_stop_grace_s": 5}) as d:
        api = ApiThread(d.config, d.store).start()
        made = iter(range(1, 1000))

        def running() -> int:
            job = d.submit({"name": f"sleeper-{next(made)}", "run": "sleep 600", "spot_policy": "on-demand",
                            "resources": {"gpu": "A100:80GB:1"}})
            d.until(lambda: d.status(job).value == "running", timeout_s=60, what=f"job {job} to run")
            return job

        def sweep() -> int:
            path = home / f"sweep-{next(made)}.yaml"
            path.write_text(yaml.safe_dump({
                "name": path.stem, "max_parallel": 1, "budget": {"max_cost": 5.0},
                "parameters": {"LR": [0.1, 0.2]}, "job": {"run": "sleep 600", "spot_policy": "on-demand",
                                                           "resources": {"gpu": "A100:80GB:1"}}}))
            return int(d.submit_sweep(path)["id"])

        def held_sweep() -> tuple[int, int]:
            """A sweep of two running trials whose cap is then lowered (as ``gpuorch sweep update``)
            to what they spent plus a third of one trial's reservation: one trial is held (a clean
            stop; it resumes when the cap allows), the other runs on. (sweep id, held trial id). Its
            deadline needs both at once (else a capped sweep runs them in turn: sweeps/plain.in_turn)."""
            path = home / f"held-{next(made)}.yaml"
            path.write_text(yaml.safe_dump({
                "name": path.stem, "max_parallel": 2, "budget": {"max_cost": 5.0}, "parameters": {"LR": [0.1, 0.2]},
                "deadline": "1h",
                "job": {"run": "sleep 600", "spot_policy": "on-demand", "resources": {"gpu": "A100:80GB:1"}}}))
            sid = str(d.submit_sweep(path)["id"])
            trials = d.until(lambda: (ts := d.service.sweep(sid)["trials"]) and len(ts) == 2 and all(
                t["status"] == "running" for t in ts) and ts, timeout_s=60, what="both trials to run")
            price = d.attempts(trials[0]["id"])[0].price_per_hour
            horizon_s = 2 * d.rec.money.policy.decision_interval_s + d.rec.money.policy.stop_grace_s
            d.service.sweep_update(sid, round(d.service.sweep(sid)["spent"] + price * horizon_s / 3600 / 3, 4))
            held = d.until(lambda: next((t["id"] for t in d.service.sweep(sid)["trials"] if t["status"] == "held"),
                                        None), timeout_s=60, what="a trial to be held")
            return int(sid), held

        beat = Beater(d.store, d.rec.owner, 5.0, "test")  # the passes the test drives, as a daemon's heartbeat
        beat.started(utcnow())

        try:
            yield {"url": api.url, "token": token, "d": d, "running": running, "sweep": sweep,
                   "held_sweep": held_sweep, "beat": lambda: beat.passed(utcnow(), "ok")}
        finally:
            api.stop()
            for j in d.service.jobs():  # no sleeper outlives the session
                if j["status"] not in ("succeeded", "failed", "cancelled"):
                    d.service.cancel(str(j["id"]))
            d.until(lambda: all(j["status"] in ("succeeded", "failed", "cancelled") for j in d.service.jobs()),
                    timeout_s=60, what="every job to end")
