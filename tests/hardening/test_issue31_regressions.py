"""Issue 31's exact reports, through the real CLI, the real HTTP server and the daemon's logging:
a NaN budget removed the cap, ``max_parallel: 1e20`` was an internal error, ``/dev/zero`` as a
catalog or token file grew without bound, a 5,000-digit cookie time was a 500, and a full disk
logged a traceback per write."""

from __future__ import annotations

import http.client
import io
import json
import logging
import secrets
import urllib.parse

import pytest
from sqlalchemy import event, text
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.store import Store
from tests.kit.cli import one_line

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def sweep_file(tmp_path):
    (tmp_path / "job.yaml").write_text("name: t\nrun: echo {X}\n")
    path = tmp_path / "sweep.yaml"
    path.write_text("name: sw\njob: job.yaml\nparameters: {X: [1, 2]}\nbudget: {max_cost: 5}\n")
    return path


def stored_cap(home) -> float | None:
    from sqlmodel import select

    from gpuorch.store.models import Sweep

    store = Store(f"sqlite:///{home / 'state.db'}")
    try:
        with store.read() as s:
            [sweep] = s.exec(select(Sweep)).all()
            return sweep.max_cost
    finally:
        store.close()


@pytest.mark.parametrize("command", ["update", "resume"])
@pytest.mark.parametrize("budget", ["nan", "NaN", "inf", "-inf", "1e308", "1e10", "0", "-5", "true", "", "1e400"])
def test_a_bad_budget_on_the_command_line_changes_nothing(_isolated_home, sweep_file, command, budget):
    assert cli("sweep", "submit", str(sweep_file)).exit_code == 0
    if command == "resume":
        assert cli("sweep", "cancel", "sw").exit_code == 0
    r = cli("sweep", command, "sw", "--budget", budget)
    assert r.exit_code == 2 and one_line(r.output).startswith("error: --budget: ") and "USD" in r.output
    assert stored_cap(_isolated_home) == 5.0  # the cap as it was; NaN was stored as NULL: no cap
    assert "of $5.00" in cli("sweep", "status", "sw").output


def test_a_good_budget_still_moves_the_cap(_isolated_home, sweep_file):
    assert cli("sweep", "submit", str(sweep_file)).exit_code == 0
    r = cli("sweep", "update", "sw", "--budget", "12.5")
    assert r.exit_code == 0 and "cap $12.50" in r.output
    assert stored_cap(_isolated_home) == 12.5


@pytest.mark.parametrize("value", ["100000000000000000000", "1e20", "1.0e+20", "-1", "0", "true"])
def test_max_parallel_out_of_range_is_one_line_exit_2(_isolated_home, sweep_file, value):
    sweep_file.write_text(sweep_file.read_text() + f"max_parallel: {value}\n")
    r = cli("sweep", "submit", str(sweep_file))
    assert r.exit_code == 2 and "max_parallel" in one_line(r.output)
    assert not (_isolated_home / "state.db").exists() or stored_sweeps(_isolated_home) == 0


def stored_sweeps(home) -> int:
    from sqlmodel import select

    from gpuorch.store.models import Sweep

    store = Store(f"sqlite:///{home / 'state.db'}")
    try:
        with store.read() as s:
            return len(s.exec(select(Sweep)).all())
    finally:
        store.close()


# -- the API ------------------------------------------------------------------------------------

@pytest.fixture
def api(_isolated_home, monkeypatch):
    pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
    from gpuorch.api.server import ApiThread
    from gpuorch.ops.config import ApiConfig, DaemonConfig

    monkeypatch.delenv("GPUORCH_API_TOKEN", raising=False)
    token = secrets.token_urlsafe(24)
    store = Store(f"sqlite:///{_isolated_home / 'state.db'}")
    server = ApiThread(DaemonConfig(home=_isolated_home, api=ApiConfig(token=token, port=0)), store).start()
    server.token = token  # type: ignore[attr-defined]
    yield server
    server.stop()
    store.close()


def call(api, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
         token: bool = True) -> tuple[int, str, dict]:
    u = urllib.parse.urlsplit(api.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request(method, path, body=body, headers={**({"Authorization": f"Bearer {api.token}"} if token else {}),
                                                   "Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    data = r.read().decode()
    conn.close()
    return r.status, data, dict(r.getheaders())


SWEEP = {"name": "sw", "job": {"run": "echo {X}"}, "parameters": {"X": [1, 2]}, "budget": {"max_cost": 5}}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_the_api_refuses_non_standard_json_numbers_naming_the_field(api, _isolated_home, number):
    assert call(api, "POST", "/v1/sweeps", json.dumps({"spec": SWEEP}).encode())[0] == 201
    code, body, _ = call(api, "POST", "/v1/sweeps/sw/update", f'{{"budget": {number}}}'.encode())
    line = json.loads(body)["detail"]
    assert code == 400 and line.startswith("request: budget: ") and "\n" not in line
    assert stored_cap(_isolated_home) == 5.0
    code, body, _ = call(api, "POST", "/v1/sweeps", json.dumps({"spec": {**SWEEP, "name": "b"}}).encode().replace(
        b'"max_cost": 5', f'"max_cost": {number}'.encode()))
    assert code == 400 and "spec.budget.max_cost" in json.loads(body)["detail"]
    assert stored_sweeps(_isolated_home) == 1


@pytest.mark.parametrize("value", ["1e20", "100000000000000000000", "1e400"])
def test_max_parallel_1e20_over_the_api_is_a_4xx_not_an_internal_error(api, _isolated_home, value):
    body = json.dumps({"spec": {**SWEEP, "max_parallel": 7}}).replace("7", value).encode()
    code, data, _ = call(api, "POST", "/v1/sweeps", body)
    assert 400 <= code < 500 and "max_parallel" in json.loads(data)["detail"], data
    assert not (_isolated_home / "state.db").exists() or stored_sweeps(_isolated_home) == 0


@pytest.mark.parametrize("cookie", ["9" * 5000 + ".abc", "²." + "a" * 64, "1" * 13 + "." + "a" * 64, "1.", ".x",
                                    "1." + "a" * 10_000])
def test_an_odd_dashboard_cookie_is_a_login_not_a_500(api, cookie):
    code, _, headers = call(api, "GET", "/ui/jobs", headers={"Cookie": f"gpuorch_session={cookie}"}, token=False)
    assert code == 303 and headers["location"].startswith("/ui/login")


def test_an_odd_bearer_token_is_a_401_not_a_500(api):
    code, body, _ = call(api, "GET", "/v1/jobs", headers={"Authorization": "Bearer " + "9" * 5000}, token=False)
    assert code == 401 and "\n" not in json.loads(body)["detail"]


# -- files a user names ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/tmp"])
def test_offers_catalog_that_is_not_a_file_is_one_line(_isolated_home, path):
    for command in (["offers", "--catalog", path], ["offers", "--catalog", path, "--gpu", "A100"]):
        r = cli(*command)
        assert r.exit_code == 2 and path in one_line(r.output) and "catalog" in r.output


def test_a_huge_catalog_is_refused_after_its_limit(tmp_path, monkeypatch):
    from gpuorch.catalog import rows

    monkeypatch.setattr(rows, "MAX_CATALOG_BYTES", 1024)
    big = tmp_path / "big.csv"
    big.write_text("x" * 2048)
    r = cli("offers", "--catalog", str(big))
    assert r.exit_code == 2 and "larger than 1024 bytes" in one_line(r.output)


@pytest.mark.parametrize("path", ["/dev/zero", "/tmp"])
def test_a_token_file_that_is_not_a_file_is_one_line(_isolated_home, tmp_path, monkeypatch, path):
    monkeypatch.delenv("GPUORCH_API_TOKEN", raising=False)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"api: {{port: 0, token_file: {path}}}\n")
    r = cli("--config", str(cfg), "serve")
    assert r.exit_code == 2 and one_line(r.output).startswith(f"error: api.token_file: {path} is ")


def test_a_config_that_is_a_device_is_one_line(_isolated_home):
    r = cli("--config", "/dev/zero", "status")
    assert r.exit_code == 2 and "--config: /dev/zero is a character device" in one_line(r.output)


# -- a full disk ------------------------------------------------------------------------------------

def enospc() -> OSError:
    try:
        with open("/dev/full", "w") as f:  # a real ENOSPC from the kernel
            f.write("x")
            f.flush()
    except OSError as e:
        return e
    raise AssertionError("/dev/full accepted a write")


def test_a_full_disk_is_one_line_through_the_daemons_handler(monkeypatch):
    from gpuorch.ops.logfmt import configure_logging

    out = io.StringIO()
    handler = configure_logging("text", "info", out)
    try:
        for i in range(100):  # every pass, from the pass, the heartbeat and the API alike
            for name in ("gpuorch.ops.daemon", "gpuorch.reconciler", "gpuorch.api"):
                try:
                    raise RuntimeError("commit failed") from enospc()
                except RuntimeError:
                    logging.getLogger(name).warning("could not write the daemon heartbeat (%s)", i, exc_info=True)
        logging.getLogger("gpuorch.api").error("an unrelated failure")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "Traceback" not in out.getvalue(), out.getvalue()[:2000]
    assert "disk full: could not write the daemon heartbeat (0)" in lines[0] and "free space" in lines[0]
    assert "an unrelated failure" in lines[1]


def test_a_full_database_does_not_flood_the_daemons_log(tmp_path):
    """The assembled daemon's passes and heartbeats (``Daemon._pass`` and ``_beat``, as
    ``Daemon.serve`` calls them) on an SQLite store that cannot grow: SQLITE_FULL, as from a
    full disk. The log says so in one line, not a traceback per pass."""
    from gpuorch.ops.daemon import Daemon
    from gpuorch.ops.logfmt import configure_logging
    from gpuorch.testing.daemon import AssembledDaemon

    out = io.StringIO()
    handler = configure_logging("text", "info", out)
    try:
        with AssembledDaemon.start(tmp_path / "home", {"max_sleep_s": 0.1, "lease_s": 1}) as d:
            daemon = Daemon(d.rec, d.config)
            engine = d.store._write
            with engine.connect() as c:
                pages = c.execute(text("PRAGMA page_count")).scalar()
            event.listen(engine, "connect", lambda con, _r: con.execute(f"PRAGMA max_page_count={pages + 8}"))
            engine.dispose()
            refused = 0
            for i in range(40):  # fill it: the last submits fail with "database or disk is full"
                try:
                    d.submit({"name": f"j{i}", "run": "sleep 60", "env": {"PAD": "x" * 2000}})
                except Exception as e:
                    assert "disk is full" in str(e)
                    refused += 1
            assert refused
            for _ in range(15):
                outcome, _ = daemon._pass()
                daemon._beat("passed", outcome)
            daemon.close()
    finally:
        logging.getLogger().removeHandler(handler)
    log = out.getvalue()
    assert "Traceback" not in log
    full = [line for line in log.splitlines() if "disk full" in line]
    assert 1 <= len(full) <= 2 and all("free space" in line for line in full), full
