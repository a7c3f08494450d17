"""Remote submission end to end: the CLI with ``--server`` against a real server on 127.0.0.1,
a reconcile pass (FakeProvider, or the local provider running real processes), and the answers
and errors the CLI prints, which must match the local ones.

Bare Reconciler: the reconciler works on the API server fixture's store (server_store), with the
FakeProvider and a fake clock for one test; the API is what is under test.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import sys
import tarfile
import threading
import urllib.error
import urllib.request

import pytest
import yaml

from gpuorch.api import upload
from gpuorch.api.client import Client, RemoteRefused
from gpuorch.clock import FakeClock
from gpuorch.errors import UserInputError
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import load_spec
from gpuorch.ops import daemon
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Job
from gpuorch.testing import wait_until
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from gpuorch_local.provider import LocalProvider

GOOD = "name: tiny\nrun: python3 hello.py\nresources: {gpu: \"A100:80GB:1\"}\n"


def test_a_job_submitted_remotely_runs(remote, local, server_store, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(GOOD)
    r = remote("submit", str(spec), "--json")
    assert r.exit_code == 0, r.output
    job = json.loads(r.output)
    assert job["status"] == "queued"
    clock = FakeClock()
    rec = Reconciler(server_store, {"fake": FakeProvider(clock, script=FakeJobScript(duration_s=120))}, clock=clock)
    for _ in range(40):
        rec.run_pass()
        clock.advance(5)
    detail = json.loads(remote("status", str(job["id"]), "--json").output)
    assert detail["status"] == "succeeded" and detail["exit_code"] == 0 and len(detail["attempt_list"]) == 1
    assert "succeeded" in [e["kind"] for e in json.loads(remote("events", str(job["id"]), "--json").output)]
    for cmd in (["status", "--json"], ["status", "tiny", "--json"], ["events", "--json"], ["events"]):
        assert remote(*cmd).output == local(*cmd).output  # the same bytes, remote or local


def test_remote_workdir_is_uploaded_and_the_job_runs_it(remote, home, server_store, tmp_path):
    src = tmp_path / "laptop" / "src"
    src.mkdir(parents=True)
    (src / "hello.py").write_text("print('hello from the laptop')\n")
    spec = tmp_path / "laptop" / "job.yaml"
    spec.write_text(GOOD + "workdir: src\nspot_policy: on-demand\n")
    job = json.loads(remote("submit", str(spec), "--json").output)
    local_provider = LocalProvider(tmp_path / "local")
    rec = Reconciler(server_store, {"local": local_provider}, settings=Settings(poll_s=0.1), logs=LogMirror(home))

    def done():
        rec.run_pass()
        return json.loads(remote("status", str(job["id"]), "--json").output)["status"] == "succeeded"

    wait_until(done, timeout_s=60, step_s=0.1, what="the remotely submitted job to succeed")
    rec.run_pass()
    out = remote("logs", str(job["id"]))
    assert out.exit_code == 0 and "hello from the laptop" in out.output
    with server_store.read() as s:
        stored = json.loads(s.get(Job, job["id"]).spec)
    assert stored["workdir"].startswith(str(home / "uploads"))  # the server's copy, not the laptop's path


@pytest.mark.parametrize("extra, field", [
    ("colour: blue\n", "colour"),
    ("max_price_per_hour: -2\n", "max_price_per_hour"),
    ("checkpoint: {store: 'ftp://host/x'}\n", "checkpoint.store"),
    ("retry: {max_failures: many}\n", "retry.max_failures"),
])
def test_schema_errors_from_the_server_are_the_local_one_liners(api, token, local, tmp_path, extra, field):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD + extra)
    r = local("submit", str(bad))
    assert r.exit_code == 2
    with pytest.raises(UserInputError) as here:
        load_spec(bad)
    with pytest.raises(RemoteRefused) as there:  # as a client that skipped local validation would see it
        Client(api.url, token).submit_raw(yaml.safe_load(bad.read_text()), str(bad), None)
    assert str(there.value) == str(here.value) and field in str(there.value)
    assert r.output.strip() == f"error: {here.value}"


@pytest.mark.parametrize("cmd", ["status", "cancel", "events", "logs"])
def test_unknown_jobs_give_the_same_line_remote_and_local(remote, local, cmd):
    r, here = remote(cmd, "42"), local(cmd, "42")
    assert r.exit_code == here.exit_code == 3 and r.output == here.output and "no job '42'" in r.output


def test_bad_requests_are_one_line_errors(api, token):
    def post(body: bytes) -> tuple[int, str]:
        req = urllib.request.Request(f"{api.url}/v1/jobs", data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())["error"]
        raise AssertionError("accepted")

    code, err = post(b"{not json")
    assert code == 400 and err.startswith("request: body") and "\n" not in err
    code, err = post(json.dumps({"spec": {"name": "x", "run": "y", "workdir": "/home/me/src"}}).encode())
    assert code == 422 and "workdir" in err and "\n" not in err
    code, err = post(json.dumps({"spec": {"name": "x", "run": "y"}, "workdir_tar": "%%%"}).encode())
    assert code == 422 and err.startswith("workdir_tar: not base64")


def test_uploads_cannot_escape_their_directory(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(UserInputError, match="workdir_tar"):
        upload.unpack(base64.b64encode(buf.getvalue()).decode(), tmp_path / "uploads")
    assert not (tmp_path / "escaped.txt").exists()


def test_an_unreachable_server_is_one_line_and_exit_1(local):
    r = local("--server", "http://127.0.0.1:9", "status")
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "cannot connect" in r.output
    r = local("--server", "127.0.0.1:8765", "status")
    assert r.exit_code == 2 and "is not an http(s) URL" in r.output


def test_the_daemon_serves_the_api_when_enabled(home, token, local, tmp_path):
    with socket.socket() as s:  # a free port for the daemon's API
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = DaemonConfig(home=home, poll_s=0.1, max_sleep_s=0.2,
                          api=ApiConfig(enabled=True, port=port, token=token))
    stop = threading.Event()
    t = threading.Thread(target=daemon.run, args=(config,), kwargs={"stop": stop})
    t.start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _healthy(url), timeout_s=60, what="the daemon's API")
        spec = tmp_path / "job.yaml"
        spec.write_text(f"name: hi\nrun: {sys.executable} -c 'print(42)'\nresources: {{gpu: T4}}\n")
        job = json.loads(local("--server", url, "--token", token, "submit", str(spec), "--json").output)

        def status():
            return json.loads(local("--server", url, "--token", token, "status", str(job["id"]), "--json").output)

        wait_until(lambda: status()["status"] == "succeeded", timeout_s=60, step_s=0.2, what="the job to succeed")
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive() and not _healthy(url)  # the API stopped with the daemon


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("body, message", [
    ("resources: {gpu: 'H100:16'}", "asks for 16 H100 on one instance; no instance has more than 8"),
    ("model: {params: 400B, method: full}", "no single instance of any GPU model holds this model"),
])
def test_a_job_no_single_instance_can_hold_is_refused_remotely(api, token, remote, tmp_path, body, message):
    spec = tmp_path / "multi.yaml"
    spec.write_text(f"name: multi\nrun: x\n{body}\n")
    r = remote("submit", str(spec))
    assert r.exit_code == 2 and message in r.output and "unless it asks for a gang with nodes: N" in r.output
    with pytest.raises(RemoteRefused) as there:  # the server refuses it too, for any client
        Client(api.url, token).submit_raw(yaml.safe_load(spec.read_text()), str(spec), None)
    assert message in str(there.value)
    assert json.loads(remote("status", "--json").output)["jobs"] == []
