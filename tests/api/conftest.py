"""A real HTTP API server on an ephemeral 127.0.0.1 port, in a thread, over a SQLite store."""

from __future__ import annotations

import secrets

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.store import Store

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
from gpuorch.api.server import ApiThread

runner = CliRunner()


@pytest.fixture
def token(monkeypatch) -> str:
    monkeypatch.delenv("GPUORCH_API_TOKEN", raising=False)  # the config's token, not the environment's
    monkeypatch.delenv("GPUORCH_SERVER", raising=False)
    return secrets.token_urlsafe(24)


@pytest.fixture
def home(_isolated_home):
    return _isolated_home


@pytest.fixture
def server_store(home):
    s = Store(f"sqlite:///{home / 'state.db'}")  # the store the CLI finds under $GPUORCH_HOME too
    yield s
    s.close()


@pytest.fixture
def api(home, server_store, token):
    config = DaemonConfig(home=home, api=ApiConfig(token=token, port=0))
    server = ApiThread(config, server_store).start()
    yield server
    server.stop()


@pytest.fixture
def remote(api, token):
    """Run the CLI against the server: ``remote("status", "--json")``."""

    def run(*args: str, token: str | None = token):
        prefix = ["--server", api.url] + (["--token", token] if token is not None else [])
        return runner.invoke(app, prefix + list(args))

    return run


@pytest.fixture
def local():
    """Run the CLI on this host's store: ``local("status", "--json")``."""
    return lambda *args: runner.invoke(app, list(args))
