"""Issue 16, items 2 and 6 (API): the token is checked before the body is read, bodies and
uploads are bounded in bytes and files, input never gets a 500, and every error is one line."""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import secrets
import tarfile
import time
import urllib.parse

import pytest

from gpuorch.api import upload
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


def request(url: str, method: str, path: str, body: bytes | None = None, token: str | None = None,
            headers: dict | None = None, send_body: bool = True) -> tuple[int, dict]:
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.putrequest(method, path)
    for k, v in {**({"Authorization": f"Bearer {token}"} if token else {}), "Content-Type": "application/json",
                 **(headers or {})}.items():
        conn.putheader(k, v)
    if body is not None and "Content-Length" not in (headers or {}):
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    if body is not None and send_body:
        conn.send(body)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data) if data else {}


def one_line(body: dict) -> str:
    line = body["detail"]
    assert isinstance(line, str) and "\n" not in line and line == body["error"]
    return line


def test_no_token_is_refused_from_the_headers_alone(small_api):
    # 200 MB announced and none of it sent: a server that read the body first would wait for it
    code, body = request(small_api.url, "POST", "/v1/jobs", b"", headers={"Content-Length": str(200 << 20)},
                         send_body=False)
    assert code == 401 and "missing API token" in one_line(body)


def test_malformed_json_without_a_token_gets_401_not_422(small_api):
    code, body = request(small_api.url, "POST", "/v1/jobs", b"{not json")
    assert code == 401


def test_a_body_over_the_limit_gets_413(small_api, api_token):
    big = json.dumps({"spec": {"name": "x", "run": "y" * (100 << 10)}}).encode()
    code, body = request(small_api.url, "POST", "/v1/jobs", big, token=api_token)
    assert code == 413 and "max_body_bytes" in one_line(body)


def test_a_chunked_body_over_the_limit_gets_413(small_api, api_token):
    u = urllib.parse.urlsplit(small_api.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    chunks = (b"x" * 8192 for _ in range(20))  # 160 KiB, no Content-Length
    conn.request("POST", "/v1/jobs", body=chunks, headers={"Authorization": f"Bearer {api_token}",
                                                           "Content-Type": "application/json"},
                 encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 413 and "max_body_bytes" in json.loads(r.read())["detail"]


def tar_of(files: int) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for i in range(files):
            info = tarfile.TarInfo(f"f{i}")
            tf.addfile(info, io.BytesIO(b""))
    return base64.b64encode(buf.getvalue()).decode()


def test_an_upload_with_too_many_files_is_refused_and_leaves_nothing(small_api, api_token, _isolated_home):
    body = json.dumps({"spec": {"name": "x", "run": "y"}, "workdir_tar": tar_of(50)}).encode()
    code, out = request(small_api.url, "POST", "/v1/jobs", body, token=api_token)
    assert code == 422 and "max_upload_files" in one_line(out)
    uploads = _isolated_home / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    code, jobs = request(small_api.url, "GET", "/v1/jobs", token=api_token)
    assert jobs == []


@pytest.mark.parametrize("ref", ["99999999999999999999999", "%C2%B2", "1" * 400])
def test_odd_job_ids_are_404_not_500(small_api, api_token, ref):
    code, body = request(small_api.url, "GET", f"/v1/jobs/{ref}", token=api_token)
    assert code == 404 and "no job" in one_line(body)


@pytest.mark.parametrize("text, field", [
    ('{"spec": {"name": "x", "run": "y", "resources": {"cpus": Infinity}}}', "resources.cpus"),
    ('{"spec": {"name": "x", "run": "y", "budget": {"max_cost": NaN}}}', "budget.max_cost"),
    ('{"spec": ' + "[" * 3000 + "]" * 3000 + "}", "request"),
])
def test_bad_json_values_are_one_line_4xx_and_store_nothing(small_api, api_token, text, field):
    code, body = request(small_api.url, "POST", "/v1/jobs", text.encode(), token=api_token)
    assert code in (400, 422) and field in one_line(body)
    assert request(small_api.url, "GET", "/v1/jobs", token=api_token)[1] == []


def test_uploads_no_job_references_are_removed(tmp_path):
    uploads = tmp_path / "uploads"
    kept, stray, fresh = (uploads / n for n in ("kept", "stray", "fresh"))
    for d in (kept, stray, fresh):
        d.mkdir(parents=True)
    old = time.time() - 7200
    for d in (kept, stray):
        os.utime(d, (old, old))
    removed = upload.sweep(uploads, {str(kept)}, time.time())
    assert removed == [stray] and kept.exists() and fresh.exists()  # fresh: a submit may be in flight
