"""``gpuorch ssh`` and ``gpuorch port`` against real sshd (issue 35): a dev box on an SSH pool host
(a throwaway sshd on 127.0.0.1, tests/sshpool) through the assembled daemon, reached with the
daemon's key and its pinned known_hosts, from the CLI (typer's runner, the daemon's config file).

- ``gpuorch ssh NAME -- CMD`` runs CMD in the job's working directory and exits with its code;
- ``gpuorch port`` carries a real TCP connection to a port on the box (the host is 127.0.0.1, so
  a server of this test is "on the box") and, while open, counts as an SSH session of the box;
- a local port in use is one line, exit 2; a finished box is one line, exit 2.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.devbox.boxes import BoxRequest
from gpuorch.devbox.forward import Forward
from gpuorch.devbox.remote import SshEndpoint, endpoint
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.sshpool, pytest.mark.timeout(300)]
runner = CliRunner()


class Echo:
    """A TCP server on 127.0.0.1 that answers each line with ``echo: <line>``."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as f:
                for line in f:
                    f.write(b"echo: " + line)
                    f.flush()

    def close(self) -> None:
        self.sock.close()


def test_ssh_runs_a_command_and_port_forwards_a_real_tcp_port(tmp_path, start_hosts, pool_options, monkeypatch):
    (host,) = start_hosts(1)
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"ssh": pool_options([host])}}) as d:
        monkeypatch.setenv("GPUORCH_HOME", str(d.config.home))
        cfg = ["--config", str(d.config.home / "daemon-config.yaml")]

        def cli(*args: str):
            return runner.invoke(app, [*cfg, *args])

        spec = BoxRequest("box", gpu="A100:80GB:1", env={"DEVBOX_TICK_S": "1"}).spec()
        job = d.submit(spec)
        d.until(lambda: d.status(job) == JobStatus.RUNNING, what="the box running on the pool host")
        assert [j["kind"] for j in d.service.jobs()] == ["dev"]

        r = cli("ssh", "box", "--", "sh", "-c", 'echo "in $(basename "$PWD") as $GPUORCH_JOB_ID"; echo oops >&2; '
                "exit 7")
        assert r.exit_code == 7, r.output
        assert "in work as" in r.output and "oops" in r.output

        _, ep = endpoint(d.config, "box")
        assert isinstance(ep, SshEndpoint) and ep.host == "127.0.0.1" and ep.port == host.sshd.port
        echo = Echo()
        try:
            with Forward.open(ep, echo.port, 0) as fwd:
                fwd.serve_in_thread()
                with socket.create_connection(("127.0.0.1", fwd.local_port), timeout=30) as c, \
                        c.makefile("rwb") as f:
                    f.write(b"hello\n")
                    f.flush()
                    assert f.readline() == b"echo: hello\n"
                # the forward holds a session on the box: its keepalive reports it
                d.until(lambda: (json.loads(d.job(job).metrics or "{}")).get("ssh_sessions") == 1,
                        what="the box to count the forward's session")

                busy = fwd.local_port  # a local port in use: one line, exit 2, nothing connected
                r = cli("port", "box", str(echo.port), "--local", str(busy))
                assert r.exit_code == 2
                [line] = r.output.strip().splitlines()
                assert f"--local: port {busy} on 127.0.0.1 is in use" in line and "--local 0" in line
        finally:
            echo.close()
        d.until(lambda: (json.loads(d.job(job).metrics or "{}")).get("ssh_sessions") == 0,
                what="the session's end once the forward closed")

        # the interactive path: the system ssh, exec'd with the pinned known_hosts (stdin not a
        # terminal here, so no pty: the login shell reads its commands from stdin)
        shell = subprocess.run([sys.executable, "-m", "gpuorch", *cfg, "ssh", "box"], input=b'echo "at $PWD"; exit 5\n',
                               capture_output=True, timeout=120)
        assert shell.returncode == 5, shell.stderr
        assert shell.stdout.decode().strip().endswith("/run/work")

        d.service.cancel("box")
        d.until_terminal(job)
        r = cli("ssh", "box", "--", "true")
        assert r.exit_code == 2 and "box is cancelled (finished)" in r.output
        assert "gpuorch dev box" in r.output


def test_the_interactive_shell_execs_ssh_with_the_pinned_known_hosts_only(tmp_path):
    from gpuorch.devbox.sessions import interactive_argv

    ep = SshEndpoint("10.0.0.5", 2222, "ubuntu", Path("/k/id"), Path("/h/known_hosts"), "/home/ubuntu/gpuorch/run")
    argv = interactive_argv(ep)
    assert argv[:4] == ["ssh", "-F", "/dev/null", "-t"]
    for opt in ("StrictHostKeyChecking=yes", "UserKnownHostsFile=/h/known_hosts", "IdentitiesOnly=yes",
                "GlobalKnownHostsFile=/dev/null"):
        assert opt in argv
    assert argv[argv.index("-i") + 1] == "/k/id" and argv[argv.index("-p") + 1] == "2222"
    assert argv[-2] == "10.0.0.5" and "/home/ubuntu/gpuorch/run/sessions" in argv[-1]


def test_a_gang_s_or_an_in_image_job_s_shell_is_on_its_first_node(tmp_path):
    from gpuorch.devbox.remote import _shell_runner
    from gpuorch.provider.gang_cloud import GangRunner
    from gpuorch.provider.localdir.runner import LocalRunner
    from gpuorch.runners.inimage import InImageRunner

    first, second = LocalRunner(tmp_path / "node0"), LocalRunner(tmp_path / "node1")
    assert _shell_runner(GangRunner([first, second], 1, 29500)) is first
    assert _shell_runner(InImageRunner(first)) is first and _shell_runner(first) is first
