"""The dashboard served by a real daemon with ``api.enabled`` (its own API thread), whose
heartbeat the daemon page then shows alive, and shows stopped once the daemon is."""

from __future__ import annotations

import secrets
import socket
import threading
import urllib.error
import urllib.request

import pytest

from gpuorch.clock import utcnow
from gpuorch.ops import daemon
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.store import Store
from gpuorch.store.heartbeat import read_state
from gpuorch.testing.contract import wait_until

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")


def _get(url: str, token: str) -> str | None:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read().decode()
    except OSError:
        return None


def test_the_daemons_own_api_serves_the_dashboard_with_its_heartbeat(_isolated_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_urlsafe(24)
    config = DaemonConfig(home=_isolated_home, poll_s=0.1, max_sleep_s=0.2,
                          api=ApiConfig(enabled=True, port=port, token=token))
    stop = threading.Event()
    t = threading.Thread(target=daemon.run, args=(config,), kwargs={"stop": stop})
    t.start()
    try:
        page = wait_until(lambda: (b := _get(f"http://127.0.0.1:{port}/ui/daemon", token)) and "alive" in b and b,
                          timeout_s=60, step_s=0.2, what="the daemon's dashboard")
        assert "Daemon: <strong>alive</strong>" in page and 'class="banner"' not in page
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive()
    store = Store(config.url)
    try:
        state = read_state(store, utcnow())
        assert state["alive"] is False and state["stopped_at"] is not None  # its clean stop is recorded
    finally:
        store.close()
