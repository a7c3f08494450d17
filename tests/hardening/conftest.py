"""A real API server on an ephemeral 127.0.0.1 port with small limits, for the hardening tests."""

from __future__ import annotations

import secrets

import pytest

from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.store import Store


@pytest.fixture
def api_token(monkeypatch) -> str:
    monkeypatch.delenv("GPUORCH_API_TOKEN", raising=False)
    return secrets.token_urlsafe(24)


@pytest.fixture
def small_api(_isolated_home, api_token):
    """The API with a 64 KiB body limit and uploads of at most 10 files / 1 MiB."""
    pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
    from gpuorch.api.server import ApiThread

    store = Store(f"sqlite:///{_isolated_home / 'state.db'}")
    config = DaemonConfig(home=_isolated_home, api=ApiConfig(token=api_token, port=0, max_body_bytes=64 << 10,
                                                             max_upload_files=10, max_upload_bytes=1 << 20))
    server = ApiThread(config, store).start()
    server.store = store  # type: ignore[attr-defined]
    yield server
    server.stop()
    store.close()
