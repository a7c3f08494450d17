"""``notify:`` of a job or sweep spec (``notify.kinds.NotifySpec``): routes added by name past
their ``jobs:``/``sweeps:`` filters, event types silenced on every route, a sweep's applying to
its trials; checked by rule (one line naming the field, exit 2, nothing stored). Delivered to a
real receiver on 127.0.0.1 that verifies with ``standardwebhooks``."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.clock import FakeClock
from gpuorch.jobs import events
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.notify.routes import build_routes
from gpuorch.notify.sender import Sender
from gpuorch.ops.config import NotificationsConfig
from gpuorch.store import Store
from gpuorch.store.models import Job, JobStatus, Sweep

pytestmark = pytest.mark.notify


def _routes(receiver, secret_file) -> NotificationsConfig:
    """``all``: every event; ``team``: only the eval-* jobs' (its filter), unless a spec names it."""
    return NotificationsConfig.model_validate({"webhooks": [
        {"url": receiver.url + "?all", "secret_file": str(secret_file), "name": "all"},
        {"url": receiver.url + "?team", "secret_file": str(secret_file), "name": "team", "jobs": ["eval-*"]}]})


def _fail(store, clock, spec: dict, sweep_id: int | None = None) -> int:
    job = jobs.submit(store, parse_spec({"run": "exit 3", "resources": {"gpu": "A100:80GB:1"}, **spec}), clock.now())
    with store.write() as s:
        row = s.get(Job, job.id)
        row.status, row.exit_code, row.sweep_id = JobStatus.FAILED, 3, sweep_id
        events.record(s, clock.now(), "failed", "failed 1 time(s)", job_id=job.id)
    return job.id


@pytest.fixture
def secret_file(tmp_path, secret):
    p = tmp_path / "webhook.key"
    p.write_text(secret)
    return p


def _got(receiver) -> list[tuple[str, str]]:
    return sorted((r.path.split("?")[1], r.verified["data"]["job"]["name"]) for r in receiver.ok())


def test_a_spec_adds_a_route_by_name_and_silences_types(store, receiver, secret_file, caplog):
    clock = FakeClock()
    config = _routes(receiver, secret_file)
    sender = Sender(store, build_routes(config), config, "daemon-a", lease_s=5.0, now=clock.now)
    _fail(store, clock, {"name": "plain"})
    _fail(store, clock, {"name": "added", "notify": {"routes": ["team"]}})
    _fail(store, clock, {"name": "quiet", "notify": {"silence": ["job.failed"]}})
    _fail(store, clock, {"name": "hushed", "notify": {"silence": "all", "routes": ["team"]}})
    _fail(store, clock, {"name": "typo", "notify": {"routes": ["teem"]}})
    with store.write() as s:  # a sweep's notify: applies to its trials
        sweep = Sweep(name="lr", spec=json.dumps({"notify": {"routes": ["team"]}}), created_at=clock.now())
        s.add(sweep)
        s.flush()
        sweep_id = sweep.id
    _fail(store, clock, {"name": "lr-0"}, sweep_id)
    with caplog.at_level(logging.WARNING, logger="gpuorch.notify"):
        while sender.tick():
            pass
    assert _got(receiver) == [("all", "added"), ("all", "lr-0"), ("all", "plain"), ("all", "typo"),
                              ("team", "added"), ("team", "lr-0")]
    assert "notify.routes names teem, which no route of this daemon has" in caplog.text


@pytest.mark.parametrize(("notify", "said"), [
    ("{silence: [job.nope]}", "notify.silence: 'job.nope' is not an event a job or sweep sends"),
    ("{silence: [daemon.restarted]}", "notify.silence: 'daemon.restarted' is not an event a job or sweep sends"),
    ("{routes: ['two words']}", "notify.routes: 'two words' is not a route name"),
    ("{route: [team]}", "notify.route: unknown key"),
])
def test_a_bad_notify_is_one_line_naming_the_field_exit_2_and_nothing_stored(tmp_path, monkeypatch, notify, said):
    home = tmp_path / "home"
    monkeypatch.setenv("GPUORCH_HOME", str(home))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: t\nrun: 'true'\nnotify: {notify}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: s\njob: {{run: 'true'}}\nparameters: {{LR: [1]}}\nnotify: {notify}\n")
    for args in (["submit", str(job)], ["sweep", "submit", str(sweep)]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2, r.output
        [line] = r.stderr.strip().splitlines()
        assert said in line, line
    if (home / "state.db").exists():
        store = Store(f"sqlite:///{home / 'state.db'}")
        with store.read() as s:
            assert s.get(Job, 1) is None
        store.close()
