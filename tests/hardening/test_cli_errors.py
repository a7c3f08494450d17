"""Issue 16, items 6, 7 and 8: one line and a meaningful exit code for every error (2 bad input,
3 not found, 4 refused, 1 runtime), the API client never takes the token to another origin, and
a full disk is one line per failed write."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from tests.kit.cli import one_line

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("ref", ["²", "99999999999999999999999", "0", "x" * 300])
def test_odd_job_references_are_not_found(ref):
    r = cli("status", ref)
    assert r.exit_code == 3 and "no job" in one_line(r)


def test_bad_input_is_2_and_not_found_is_3(tmp_path):
    bad = tmp_path / "job.yaml"
    bad.write_text("name: x\nrun: ''\n")
    r = cli("submit", str(bad))
    assert r.exit_code == 2 and "run" in one_line(r)
    r = cli("cancel", "nosuchjob")
    assert r.exit_code == 3 and "no job" in one_line(r)


@pytest.mark.parametrize("text, field", [
    ("lease_s: .inf\n", "lease_s"),
    ("poll_s: .nan\n", "poll_s"),
    ("database_url: 'garbage:::'\n", "database_url"),
    ("poll_s: 1\npoll_s: 2\n", "twice"),
])
def test_bad_configuration_is_one_line_exit_2(tmp_path, text, field):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    r = cli("--config", str(cfg), "status")
    assert r.exit_code == 2 and field in one_line(r)


def test_non_utf8_configuration_is_one_line(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(b"poll_s: \xff\n")
    r = cli("--config", str(cfg), "status")
    assert r.exit_code == 2 and "UTF-8" in one_line(r)


def test_an_unwritable_database_is_one_line_exit_1(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("database_url: sqlite:////dev/null/state.db\n")  # under a file: not creatable, even by root
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\nrun: 'true'\n")
    r = cli("--config", str(cfg), "submit", str(spec))
    assert r.exit_code == 1 and "/dev/null" in one_line(r)


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []
    location = ""

    def do_GET(self):  # the stdlib's name
        type(self).seen.append(self.headers.get("Authorization"))
        if type(self).location:
            self.send_response(302)
            self.send_header("Location", type(self).location + self.path)
            self.end_headers()
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"[]")

    def log_message(self, *args):
        pass


def serve(handler) -> http.server.HTTPServer:
    srv = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_the_client_does_not_follow_a_redirect_with_the_token():
    class Other(_Recorder):
        seen = []
        location = ""

    class First(_Recorder):
        seen = []

    other = serve(Other)
    First.location = f"http://127.0.0.1:{other.server_port}"  # another origin (another port)
    first = serve(First)
    token = "s3cret-token-" + "q" * 20
    try:
        r = cli("--server", f"http://127.0.0.1:{first.server_port}", "--token", token, "status")
    finally:
        first.shutdown()
        other.shutdown()
    assert First.seen == [f"Bearer {token}"] and Other.seen == []  # the token never went on
    assert r.exit_code == 2 and "redirects" in one_line(r) and token not in r.output


def test_guard_turns_a_full_disk_into_one_line(tmp_path):
    from gpuorch.cli.app import guard

    def write() -> None:
        with guard(), open("/dev/full", "w") as f:  # a real ENOSPC from the kernel
            f.write("x")
            f.flush()

    with pytest.raises(Exception) as e:
        write()
    assert getattr(e.value, "exit_code", None) == 1


def test_the_daemon_reports_a_full_disk_once_a_minute(caplog):
    import logging

    from gpuorch.ops.diskfull import DiskFullLog

    now = [0.0]
    log = DiskFullLog(logging.getLogger("gpuorch.test"), every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, "gpuorch.test"):
        for _ in range(100):
            try:
                with open("/dev/full", "w") as f:
                    f.write("x")
                    f.flush()
            except OSError as err:
                assert log.report(err, "write")
            now[0] += 1
    assert [r.message.startswith("disk full") for r in caplog.records] == [True, True]  # t=0 and t=60
    assert "59 more" in caplog.records[1].message
    assert not log.report(ValueError("not a disk"), "write")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) to mount a small tmpfs")
def test_submit_on_a_full_disk_is_one_line_exit_1(tmp_path):
    """A real full file system: a 256 KiB tmpfs in a private mount namespace, filled up."""
    home = tmp_path / "home"
    home.mkdir()
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\nrun: 'true'\n")
    script = (f"mount -t tmpfs -o size=256k tmpfs {home} && "
              f"(head -c 10M /dev/zero > {home}/fill 2>/dev/null || true) && "
              f"exec {sys.executable} -m gpuorch submit {spec}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUORCH_")} | {"GPUORCH_HOME": str(home)}
    p = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    if "mount" in p.stderr and p.returncode != 0 and "disk full" not in p.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:200]}")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: disk full"), p.stderr


@pytest.mark.parametrize("args", [["cost", "--since", "99999999999999999d"]])
def test_durations_past_the_calendar_are_one_line(args):
    r = cli(*args)
    assert r.exit_code == 2 and "shorter duration" in one_line(r)
