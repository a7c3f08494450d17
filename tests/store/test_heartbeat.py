"""Daemon heartbeats: written by the daemon, read by the CLI's one-line warning and status --json."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.clock import utcnow
from gpuorch.store import Store
from gpuorch.store.heartbeat import Beater, daemon_state, read_state, stale_after_s, warning
from gpuorch.store.models import Heartbeat, Job

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


def test_a_daemon_is_alive_until_it_misses_a_few_intervals_or_stops(store):
    beat = Beater(store, "h/1/a", 5.0, "0.1.0")
    beat.started(T0)
    assert read_state(store, T0)["alive"] is True  # started, no pass yet: counted from the start
    assert beat.passed(T0 + timedelta(seconds=1), "ok") is True
    limit = stale_after_s(5.0)
    assert read_state(store, T0 + timedelta(seconds=1 + limit))["alive"] is True
    state = read_state(store, T0 + timedelta(seconds=1 + limit + 1))
    assert state["alive"] is False and state["last_outcome"] == "ok"
    assert "gpuorch daemon" in warning(state) and "systemctl start gpuorch" in warning(state)
    beat.stopped(T0 + timedelta(seconds=2))
    state = read_state(store, T0 + timedelta(seconds=3))
    assert state["alive"] is False and state["stopped_at"] == T0 + timedelta(seconds=2)  # a clean stop is not alive
    assert warning(state).startswith("the gpuorch daemon stopped at 2026-03-01 08:00:02 UTC")


def test_passes_are_stamped_at_most_once_per_interval_unless_one_fails(store):
    beat = Beater(store, "h/1/a", 5.0, "0.1.0")
    beat.started(T0)
    assert beat.passed(T0, "ok") is True
    assert beat.passed(T0 + timedelta(seconds=2), "ok") is False  # no write for a quick second pass
    assert beat.passed(T0 + timedelta(seconds=3), "failed") is True  # a failure is recorded at once
    assert read_state(store, T0 + timedelta(seconds=3))["last_outcome"] == "failed"
    assert beat.passed(T0 + timedelta(seconds=4), "ok") is True
    with store.read() as s:
        assert s.get(Heartbeat, "h/1/a").last_pass_at == T0 + timedelta(seconds=4)


def test_the_state_names_each_daemon_and_the_jobs_it_holds(store):
    for owner in ("h/1/a", "h/2/b"):
        Beater(store, owner, 5.0, "0.1.0").started(T0)
    with store.write() as s:
        s.add(Job(name="x", spec="{}", created_at=T0, lease_owner="h/2/b", lease_expires=T0 + timedelta(minutes=1)))
        s.add(Job(name="y", spec="{}", created_at=T0, lease_owner="h/1/a", lease_expires=T0 - timedelta(minutes=1)))
    state = read_state(store, T0)
    assert {d["owner"]: d["jobs_held"] for d in state["daemons"]} == {"h/1/a": 0, "h/2/b": 1}  # expired: not held


def test_no_heartbeat_at_all_says_no_daemon_has_run():
    state = daemon_state([], {}, T0)
    assert state == {"alive": False, "stopped_at": None, "last_pass_at": None, "last_outcome": None, "age_s": None,
                     "daemons": []}
    assert warning(state).startswith("no gpuorch daemon has run on this store")


def _job(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("name: tiny\nrun: 'true'\nresources: {gpu: T4}\n")
    return p


def test_submit_status_and_sweep_status_warn_in_one_line_when_no_daemon_runs(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["submit", str(_job(tmp_path))])
    assert r.exit_code == 0
    [warn] = [line for line in r.stderr.splitlines() if "daemon" in line]
    assert warn.startswith("warning: no gpuorch daemon has run on this store") and "`gpuorch daemon`" in warn
    assert "warning: no gpuorch daemon" in runner.invoke(app, ["status"]).stderr
    assert "warning: no gpuorch daemon" in runner.invoke(app, ["sweep", "status"]).stderr
    r = runner.invoke(app, ["status", "--json"])  # --json: the state is in the JSON, stderr stays quiet
    assert r.stderr == "" and json.loads(r.stdout)["daemon"]["alive"] is False


def test_no_warning_while_a_daemon_passes(tmp_path):
    from gpuorch.store.paths import default_url

    store = Store(default_url())
    Beater(store, "h/1/a", 5.0, "0.1.0").started(utcnow())
    store.close()
    runner = CliRunner()
    r = runner.invoke(app, ["submit", str(_job(tmp_path))])
    assert r.exit_code == 0 and "daemon" not in r.stderr
    detail = json.loads(runner.invoke(app, ["status", "tiny", "--json"]).stdout)
    assert detail["daemon"]["alive"] is True and detail["daemon"]["daemons"][0]["owner"] == "h/1/a"
    assert detail["daemon"]["holder"] is None  # no daemon holds the queued job's lease


def test_a_real_daemon_stamps_its_pass_and_its_clean_stop(_isolated_home):
    from gpuorch.ops import daemon
    from gpuorch.ops.config import DaemonConfig
    from gpuorch.store.paths import default_url

    daemon.run(DaemonConfig(home=_isolated_home, poll_s=0.1, max_sleep_s=0.2), once=True)
    store = Store(default_url())
    try:
        with store.read() as s:
            [row] = s.exec(select(Heartbeat)).all()
        assert row.last_outcome == "ok" and row.last_pass_at is not None and row.stopped_at is not None
        assert row.interval_s == 0.2 and row.owner.count("/") == 2
        assert read_state(store, utcnow())["alive"] is False  # stopped cleanly: not counted as running
    finally:
        store.close()


def test_logs_follow_warns_before_it_waits(tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["submit", str(_job(tmp_path))]).exit_code == 0
    from gpuorch.store.models import JobStatus
    from gpuorch.store.paths import default_url

    store = Store(default_url())
    with store.write() as s:  # over (as a daemon would have left it), so -f returns after one read
        s.exec(select(Job)).one().status = JobStatus.CANCELLED
    store.close()
    r = runner.invoke(app, ["logs", "-f", "tiny"])
    assert r.exit_code == 0 and r.stderr.startswith("warning: no gpuorch daemon has run on this store")
    assert runner.invoke(app, ["logs", "tiny"]).stderr == ""  # without -f nothing waits: no warning


def test_status_still_works_against_a_server_without_the_daemon_endpoint():
    from gpuorch.cli.jobs import _daemon_state
    from gpuorch.errors import GpuorchError

    class OldServer:  # a gpuorch API from before GET /v1/daemon answers 404
        def daemon(self):
            raise GpuorchError("http://old: HTTP 404: Not Found")

    assert _daemon_state(OldServer()) is None
