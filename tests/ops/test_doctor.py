"""`gpuorch doctor`: each check against real files, a real database, real sockets."""

from __future__ import annotations

import json
import os
import socket
import sqlite3

import pytest
from daemon_proc import CONFIG, DaemonProcess, wait_until
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.clock import utcnow
from gpuorch.doctor import Context, Finding, run
from gpuorch.doctor.providers import check_credentials
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.store import Store
from gpuorch.store.migrations import SCHEMA_VERSION
from gpuorch.testing.fake_provider import FakeProvider

runner = CliRunner()


@pytest.fixture(autouse=True)
def _any_metrics_port(monkeypatch):
    """Whatever else listens on this machine, the default metrics port is not under test here."""
    monkeypatch.setenv("GPUORCH_METRICS__PORT", "0")


def doctor(*args, env=None):
    r = runner.invoke(app, [*args, "doctor", "--json"], env=env)
    return r.exit_code, json.loads(r.output)


def by_check(report, check):
    return [f for f in report["findings"] if f["check"] == check]


def statuses(report):
    return {(f["check"], f["status"]) for f in report["findings"]}


@pytest.fixture
def database(_isolated_home):
    s = Store(f"sqlite:///{_isolated_home / 'state.db'}")
    yield s
    s.close()


def test_a_healthy_installation(database):
    from gpuorch.store.heartbeat import Beater

    Beater(database, "host/1/abc", 5.0, "test").started(utcnow())  # a daemon runs on this store
    code, report = doctor()
    assert code == 0 and report["ok"] is True
    # Every installed adapter (aws too, in the test environment) is checked; all must be fine.
    assert {("config", "ok"), ("database", "ok"), ("provider local", "ok"), ("object stores", "ok"),
            ("ssh keys", "ok"), ("metrics", "ok")} <= statuses(report)
    # Whether local jobs can run as another user depends on this host (root, a reachable Python):
    # tests/harness/test_local_isolation.py checks that finding.
    assert {status for check, status in statuses(report) if check != "local isolation"} == {"ok"}
    assert f"schema {SCHEMA_VERSION}, journal wal" in by_check(report, "database")[0]["message"]


def test_text_output_names_each_problem_and_its_fix(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("lease_s: -5\n")
    r = runner.invoke(app, ["--config", str(bad), "doctor"])
    assert r.exit_code == 1
    assert f"FAIL  config  --config {bad}: lease_s: must be greater than 0; raise it" in r.output
    assert "fix: correct the option named above" in r.output
    assert r.output.splitlines()[-1].startswith(("1 problem found", "1 problem, ")), r.output  # warnings beside


def test_a_missing_database_is_a_warning_not_a_failure():
    code, report = doctor()
    assert code == 0 and ("database", "warn") in statuses(report)


def test_schema_newer_than_this_gpuorch_and_journal_not_wal(database, _isolated_home):
    path = _isolated_home / "state.db"
    database.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    code, report = doctor()
    assert code == 1
    found = {f["message"].split(" (")[0]: f["fix"] for f in by_check(report, "database") if f["status"] == "fail"}
    assert f"{path} has schema 99, newer than this gpuorch" in "".join(found)
    assert any("PRAGMA journal_mode=WAL" in fix for fix in found.values())


def test_ssh_keys_must_be_private(_isolated_home):
    keys = _isolated_home / "keys"
    keys.mkdir(mode=0o700)
    (keys / "id_ed25519.pub").write_text("ssh-ed25519 AAAA")
    os.chmod(keys / "id_ed25519.pub", 0o644)
    key = keys / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    os.chmod(key, 0o600)
    assert ("ssh keys", "ok") in statuses(doctor()[1])
    os.chmod(key, 0o640)
    code, report = doctor()
    [f] = by_check(report, "ssh keys")
    assert code == 1 and f["status"] == "fail" and f["fix"] == f"chmod 600 {key}"
    assert "BEGIN" not in json.dumps(report)


def test_metrics_port_taken_by_another_program():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        code, report = doctor(env={"GPUORCH_METRICS__PORT": str(port)})
    [f] = by_check(report, "metrics")
    assert code == 1 and f["message"] == f"127.0.0.1:{port} is taken by another program"
    assert f["fix"].startswith("set metrics.port")
    code, report = doctor(env={"GPUORCH_METRICS__PORT": str(port)})  # closed now
    assert code == 0 and [f["message"] for f in by_check(report, "metrics")] == [
        f"127.0.0.1:{port} is free for the daemon's /metrics"]


def test_metrics_port_served_by_a_running_daemon_is_fine(_isolated_home):
    d = DaemonProcess(_isolated_home, config=CONFIG + "metrics: {port: 0}\n")
    try:
        d.ready()
        url = wait_until(lambda: next((m["metrics_url"] for m in d.log() if "metrics_url" in m), None))
        port = url.rsplit(":", 1)[1].split("/")[0]
        code, report = doctor(env={"GPUORCH_METRICS__PORT": port})
    finally:
        d.close()
    assert [f["message"] for f in by_check(report, "metrics")] == [f"a gpuorch daemon serves {url}"]


def test_an_enabled_provider_that_is_not_installed(monkeypatch):
    monkeypatch.setenv("GPUORCH_PROVIDERS", "{local: {}, nimbus: {}}")
    code, report = doctor()
    [f] = by_check(report, "provider nimbus")
    assert code == 1 and f["status"] == "fail" and f["fix"].startswith("pip install 'gpuorch[nimbus]'")


def test_checkpoint_stores_of_unfinished_jobs(database, tmp_path, monkeypatch):
    # An S3 endpoint on a closed local port: unreachable, and nothing leaves this machine.
    monkeypatch.setenv("GPUORCH_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = {"run": "x", "resources": {"gpu": "T4"}}
    jobs.submit(database, parse_spec({**spec, "name": "file", "checkpoint": {"store": f"file://{tmp_path}/ck"}}),
                utcnow())
    jobs.submit(database, parse_spec({**spec, "name": "s3", "checkpoint": {"store": "s3://bucket/runs"}}), utcnow())
    code, report = doctor()
    found = {f["message"].split(" ")[0]: f for f in by_check(report, "object stores")}
    assert found[f"file://{tmp_path}/ck"]["status"] == "ok"
    s3 = found["s3://bucket/runs"]
    assert s3["status"] == "fail" and ("aws extra" in s3["message"] or "unreachable" in s3["message"])
    assert code == 1


def test_a_password_in_a_world_readable_config_is_flagged_and_never_printed(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("database_url: postgresql://gpuorch:hunter2secret@127.0.0.1:1/gpuorch\n")
    os.chmod(cfg, 0o644)
    r = runner.invoke(app, ["--config", str(cfg), "doctor", "--json"])
    assert "hunter2secret" not in r.output
    report = json.loads(r.output)
    assert any(f["status"] == "warn" and f["fix"] == f"chmod o-r {cfg} (or pass the URL as GPUORCH_DATABASE_URL)"
               for f in by_check(report, "config"))
    [db] = by_check(report, "database")
    assert db["status"] == "fail" and "postgresql://gpuorch:***@127.0.0.1:1/gpuorch" in db["message"]


class SelfChecking(FakeProvider):
    def doctor(self) -> list[Finding]:
        return [Finding.fail(f"provider {self.name}", "no credentials found in the standard chain",
                             "set AWS_PROFILE or run aws configure")]


class Exploding(FakeProvider):
    def doctor(self) -> list[Finding]:
        raise RuntimeError("token=sk-very-secret")


def test_credentials_come_from_each_provider_capability_never_from_its_name():
    ctx = Context(providers={"a": SelfChecking(name="a"), "b": FakeProvider(name="b"), "c": Exploding(name="c")})
    found = {f.check: f for f in check_credentials(ctx)}
    assert found["provider a"].status == "fail" and found["provider a"].fix == "set AWS_PROFILE or run aws configure"
    assert found["provider b"].status == "warn" and "no self-check" in found["provider b"].message
    assert found["provider c"].status == "fail" and "sk-very-secret" not in found["provider c"].message


def test_a_crashing_check_is_a_finding_not_a_crash():
    def check_broken(ctx):
        raise ValueError("oops")
        yield

    [f] = run(checks=[check_broken])
    assert (f.check, f.status) == ("broken", "fail") and "ValueError: oops" in f.message


def test_no_daemon_running_is_a_finding_with_the_fix(database):
    from datetime import timedelta

    from gpuorch.store.heartbeat import Beater

    code, report = doctor()
    [f] = by_check(report, "daemon")
    assert f["status"] == "warn" and "no daemon has ever run" in f["message"]
    assert "gpuorch daemon" in f["fix"] and "systemctl start gpuorch" in f["fix"]
    beat = Beater(database, "host/1/abc", 5.0, "test")
    beat.started(utcnow() - timedelta(hours=1))
    beat.passed(utcnow() - timedelta(hours=1), "ok")
    [f] = by_check(doctor()[1], "daemon")
    assert f["status"] == "warn" and "the last pass was 3600s ago" in f["message"]
    beat.passed(utcnow(), "failed")
    [f] = by_check(doctor()[1], "daemon")
    assert f["status"] == "warn" and "its last pass failed" in f["message"]
    beat._last_write = None
    beat.passed(utcnow(), "ok")
    [f] = by_check(doctor()[1], "daemon")
    assert f["status"] == "ok" and "host/1/abc (0 jobs held)" in f["message"]
    beat.stopped(utcnow())
    [f] = by_check(doctor()[1], "daemon")
    assert f["status"] == "warn" and "the last one stopped at" in f["message"]


@pytest.mark.parametrize("provider", ["local", "sim"])
def test_the_embedded_providers_pass_their_own_self_check(database, tmp_path, provider):
    from pathlib import Path

    traces = Path(__file__).resolve().parents[1] / "data" / "spot-traces" / "aws-p3-2023"
    options = f"{{traces: '{traces}'}}" if provider == "sim" else "{}"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"home: {tmp_path / 'home'}\nproviders:\n  {provider}: {options}\n")
    code, report = doctor("--config", str(cfg))
    found = by_check(report, f"provider {provider}")
    assert found and all(f["status"] == "ok" for f in found), found  # never "upgrade the adapter"
    assert any("no credentials needed" in f["message"] for f in found)


def test_each_enabled_provider_lists_its_own_capabilities(database):
    code, report = doctor()  # the default configuration enables local
    [loaded] = [f for f in by_check(report, "provider local") if "enabled and loaded" in f["message"]]
    assert "simulated reclaims (debug preempt)" in loaded["message"] and "self-check" in loaded["message"]
