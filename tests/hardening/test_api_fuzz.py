"""Issue 16, build item 7: a bounded fuzz pass over the HTTP API with schemathesis.

The served app has no schema endpoint (``openapi_url=None``: nothing is published to an
unauthenticated client), so the schema is FastAPI's own, generated from the same app by
``app.openapi()``. Every generated request goes to a real server on 127.0.0.1 with the token;
no answer may be a 5xx, and every error is ``{"error", "detail"}`` on one line.
"""

from __future__ import annotations

import secrets

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[dev]' installs schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from gpuorch.api.server import ApiThread, create_app  # noqa: E402
from gpuorch.jobs.service import JobService  # noqa: E402
from gpuorch.ops.config import ApiConfig, DaemonConfig  # noqa: E402
from gpuorch.store import Store  # noqa: E402

TOKEN = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("fuzz-home")
    store = Store(f"sqlite:///{home / 'state.db'}")
    config = DaemonConfig(home=home, providers={"local": {}}, api=ApiConfig(token=TOKEN, port=0))
    api = ApiThread(config, store, host="127.0.0.1").start()
    yield api, store, home
    api.stop()
    store.close()


@pytest.fixture(scope="module")
def api_schema(server):
    _, store, home = server
    app = create_app(JobService(store, home, providers={"local": {}}), TOKEN, home / "uploads")
    return schemathesis.openapi.from_dict(app.openapi())


def one_line_errors(response, case) -> None:
    assert response.status_code < 500, f"{case.method} {case.path}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("detail"), str) and "\n" not in body["detail"], body


def test_no_input_gets_a_server_error(server, api_schema):
    """Each operation of the schema, 25 generated requests each (about 300 in all)."""
    api, _, _ = server
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # jobs, events, logs, sweeps: the whole API is covered
    for op in operations:
        @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy())
        def call(case) -> None:
            response = case.call(base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
            one_line_errors(response, case)

        call()
