"""Token authentication: missing and wrong tokens get 401 and one clear CLI line (exit 4: refused); the
token is compared in constant time, never logged, and the server will not start without one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from gpuorch.api import auth
from gpuorch.ops.config import ApiConfig


def get(url: str, authorization: str | None = None) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def test_missing_and_wrong_tokens_get_401(api, token, caplog):
    caplog.set_level(1)
    for sent, why in [(None, "missing API token"), ("Bearer ", "missing API token"), (f"Basic {token}", "missing"),
                      ("Bearer " + "x" * 32, "not accepted"), (f"Bearer {token}x", "not accepted")]:
        code, body, headers = get(f"{api.url}/v1/jobs", sent)
        assert code == 401 and why in body["error"] and headers["www-authenticate"] == "Bearer", sent
    assert get(f"{api.url}/v1/jobs", f"Bearer {token}")[0] == 200
    assert get(f"{api.url}/v1/health")[:2] == (200, {"ok": True})  # the one endpoint without a token
    assert "/v1/jobs" in caplog.text and token not in caplog.text  # requests are logged, tokens never


@pytest.mark.parametrize("cmd", [["status"], ["events"], ["cancel", "1"], ["logs", "1"], ["status", "--json"]])
def test_cli_with_a_wrong_or_no_token_exits_4_with_one_line(remote, cmd, tmp_path, caplog):
    caplog.set_level(1)  # everything, uvicorn's TRACE included
    wrong = "wrong-token-" + "z" * 20
    for token, why in [(wrong, "the API token was not accepted"), (None, "missing API token")]:
        r = remote(*cmd, token=token)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 4 and len(lines) == 1 and lines[0].startswith("error: http://127.0.0.1:"), r.output
        assert why in lines[0] and "GPUORCH_API_TOKEN" in lines[0]
    assert wrong not in caplog.text and wrong not in r.output  # never logged, never echoed


def test_submit_with_a_wrong_token_queues_nothing(remote, local, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: tiny\nrun: 'true'\nresources: {gpu: T4}\n")
    r = remote("submit", str(spec), token="nope-" + "n" * 20)
    assert r.exit_code == 4 and "not accepted" in r.output
    assert json.loads(local("status", "--json").output)["jobs"] == []


def test_the_token_comes_from_env_then_config_then_file(tmp_path, monkeypatch):
    monkeypatch.delenv(auth.ENV, raising=False)
    f = tmp_path / "token"
    f.write_text("from-the-file-0123456789\n")
    assert auth.server_token(ApiConfig(token_file=f)) == "from-the-file-0123456789"
    token = "from-the-config-0123456789"
    assert auth.server_token(ApiConfig(token=token, token_file=f)) == token
    monkeypatch.setenv(auth.ENV, "from-the-environment-0123")
    assert auth.server_token(ApiConfig(token="from-the-config-0123456789")) == "from-the-environment-0123"
    assert "from-the-config" not in repr(ApiConfig(token="from-the-config-0123456789"))  # SecretStr


def test_constant_time_check():
    assert auth.check("Bearer s3cret-token-0123456789", "s3cret-token-0123456789") is None
    assert auth.check("bearer  s3cret-token-0123456789 ", "s3cret-token-0123456789") is None
    assert "not accepted" in auth.check("Bearer s3cret-token-012345678", "s3cret-token-0123456789")
    assert "missing" in auth.check("Basic dXNlcjpwdw==", "s3cret-token-0123456789")


@pytest.mark.parametrize("config, why", [
    ("api: {port: 0}\n", "api.token: the HTTP API needs a token"),
    ("api: {port: 0, token: short}\n", "api.token: too short"),
    ("api: {port: 0, token_file: /nonexistent/token}\n", "api.token_file: cannot read"),
])
def test_serve_will_not_start_without_a_usable_token(local, tmp_path, monkeypatch, config, why):
    monkeypatch.delenv(auth.ENV, raising=False)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config)
    r = local("--config", str(cfg), "serve")
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and why in lines[0], r.output
