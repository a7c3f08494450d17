"""Bad notification settings through the real CLI (``gpuorch --config FILE daemon``): one line
naming the field and the fix, exit code 2, and nothing written (no state store is created).
Cases are built by rule (each rule of docs/notifications.md broken in a few ways), not one
example each."""

from __future__ import annotations

import base64

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app

pytestmark = pytest.mark.notify
runner = CliRunner()


def _key(n: int) -> str:
    return "whsec_" + base64.b64encode(bytes(range(n))).decode()


def _run(tmp_path, notifications, env=None):
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump({"providers": {"local": {}}, "metrics": {"enabled": False},
                                    "notifications": notifications}))
    return runner.invoke(app, ["--config", str(path), "daemon", "--once"], env=env)


def _hook(tmp_path, key=None, **fields):
    f = tmp_path / "key"
    f.write_text(key if key is not None else _key(32))
    return {"url": "https://hooks.example.org/gpuorch", "secret_file": str(f), **fields}


BAD_URLS = ["ftp://example.org/x", "file:///etc/passwd", "example.org/hook", "https://", "http:///path",
            "https://exa mple.org/", "https://example.org/\nX-Evil: 1", "javascript:alert(1)", "https://h:99999/",
            "https://h:port/", "", "  "]
BAD_KINDS = ["job.exploded", "JOB.FAILED", "job", "*", "job.failed ", "sweep_done"]
BAD_TIMES = ["25:00", "7:30", "07:60", "07:30:00", "0730", "noon", "-1:00", "24:00", "07.30", ""]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_webhook_url_that_is_not_http_is_refused(tmp_path, url):
    r = _run(tmp_path, {"webhooks": [_hook(tmp_path, url=url)]})
    _refused(r, tmp_path, "notifications.webhooks.0.url")


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_an_unknown_event_kind_is_refused_with_the_known_ones(tmp_path, kind):
    r = _run(tmp_path, {"webhooks": [_hook(tmp_path, events=["job.failed", kind])]})
    _refused(r, tmp_path, "notifications.webhooks.0.events")
    assert "job.succeeded" in r.output  # the fix: the kinds that exist


@pytest.mark.parametrize("at", BAD_TIMES)
def test_report_at_that_is_not_a_time_of_day_is_refused(tmp_path, at):
    _refused(_run(tmp_path, {"report_at": at}), tmp_path, "notifications.report_at")


@pytest.mark.parametrize("n", [0, 1, 16, 23, 65, 128])
def test_a_signing_key_outside_the_specifications_sizes_is_refused(tmp_path, n):
    r = _run(tmp_path, {"webhooks": [_hook(tmp_path, key=_key(n) if n else "")]})
    _refused(r, tmp_path, "notifications.webhooks[0].secret_file")


@pytest.mark.parametrize("key", ["whsec_not base64!", "whsec_@@@@", "whsec_" + "A" * 33])
def test_a_signing_key_that_is_not_base64_is_refused(tmp_path, key):
    _refused(_run(tmp_path, {"webhooks": [_hook(tmp_path, key=key)]}), tmp_path,
             "notifications.webhooks[0].secret_file")


def test_a_missing_secret_is_refused(tmp_path):
    hook = _hook(tmp_path)
    del hook["secret_file"]
    _refused(_run(tmp_path, {"webhooks": [hook]}), tmp_path, "notifications.webhooks.0")
    _refused(_run(tmp_path, {"webhooks": [_hook(tmp_path, secret_env="GPUORCH_TEST_UNSET_KEY")]}), tmp_path,
             "notifications.webhooks.0")  # both given
    hook = {**_hook(tmp_path), "secret_file": str(tmp_path / "nope")}
    _refused(_run(tmp_path, {"webhooks": [hook]}), tmp_path, "notifications.webhooks[0].secret_file")
    hook = {"url": "https://h.example/x", "secret_env": "GPUORCH_TEST_UNSET_KEY"}
    _refused(_run(tmp_path, {"webhooks": [hook]}), tmp_path, "notifications.webhooks[0].secret_env")


@pytest.mark.parametrize("url", ["nosuchservice://token", "slack://", "json", "mailto://", "tgram://x", "://x"])
def test_an_apprise_url_apprise_cannot_parse_is_refused(tmp_path, url):
    _refused(_run(tmp_path, {"apprise": [url]}), tmp_path, "notifications.apprise")


def test_a_secret_in_a_refused_url_is_not_echoed(tmp_path):
    r = _run(tmp_path, {"apprise": ["nosuchservice://s3cr3tT0ken@host"]})
    _refused(r, tmp_path, "notifications.apprise")
    assert "s3cr3tT0ken" not in r.output


def _refused(r, tmp_path, field):
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1, r.output
    assert field in lines[0], lines[0]
    assert not list(tmp_path.rglob("state.db")), "nothing is written for a refused configuration"
