"""``gpuorch ssh`` into a job's container (issue 35: "a job too, for debugging"): a job with an
``image:`` gets its shell inside its container, ``--host`` on the instance.

- The command built: ``<runtime> exec -i [-t] <container> /bin/sh -c <session>`` as a list, each
  element quoted; run through a real ``/bin/sh`` with a stand-in runtime that records its argv.
- Which ``containers.jsonl`` record is trusted: this attempt's container names only, a runtime the
  agent may have used only (the file lies where the job can write).
- Against real sshd and podman (a Lambda VM played by an sshd on 127.0.0.1, the image of
  tests/workloads/podman_image.py; skipped cleanly without podman): a command runs in the
  container and returns its exit code, the interactive shell opens there, ``--host`` does not.
- On the local provider (no sshd: a shell of this host) with this host's configured runtime
  (podman with flags, which only the configuration makes trusted): the same, in the container.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.agent.container import container_name
from gpuorch.cli import app
from gpuorch.devbox.keepalive import session_command
from gpuorch.devbox.remote import DETECTED, Container, LocalEndpoint, SshEndpoint, endpoint, find_container
from gpuorch.devbox.sessions import interactive_argv, remote_line
from gpuorch.errors import UserInputError
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdalabs"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
from fake_lambda import KEY, FakeLambda
from podman_image import PODMAN, ULIMITS, build_image, local_container, unavailable
from sshd import Sshd, SshdUnavailable

runner = CliRunner()
NAME = "gpuorch-0123456789ab-7-1-running"


def recorder(tmp_path: Path) -> Path:
    """A stand-in runtime: writes its argv (as JSON) to argv.json beside it and exits 3."""
    exe = tmp_path / "runtime"
    exe.write_text(f"#!{sys.executable}\nimport json, sys\n"
                   f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\nsys.exit(3)\n")
    exe.chmod(0o755)
    return exe


def test_a_container_session_is_the_runtime_s_exec_with_every_element_quoted(tmp_path):
    exe = recorder(tmp_path)
    run_dir = tmp_path / "run dir; $(touch pwned)"  # quoting: a path a shell would split or run
    c = Container((str(exe), "--runtime", "runc"), NAME)
    ep = LocalEndpoint(run_dir, c)
    argv = ["sh", "-c", "echo 'a b' \"$HOME\"; exit 3"]
    done = subprocess.run(["/bin/sh", "-c", remote_line(ep, argv)], stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 3
    inner = session_command(str(run_dir), f"{run_dir}/work", shlex.join(argv))
    assert json.loads((tmp_path / "argv.json").read_text()) == ["--runtime", "runc", "exec", "-i", NAME, "/bin/sh",
                                                                  "-c", inner]
    assert not (Path.cwd() / "pwned").exists() and not (tmp_path / "pwned").exists()
    # the interactive shell: -t only where stdin is a terminal (here it is not)
    subprocess.run(["/bin/sh", "-c", remote_line(ep, None, tty=True)], stdin=subprocess.DEVNULL, check=False)
    login = json.loads((tmp_path / "argv.json").read_text())
    assert login[:5] == ["--runtime", "runc", "exec", "-i", NAME] and "-t" not in login
    assert login[-1] == session_command(str(run_dir), f"{run_dir}/work", None)
    ssh = interactive_argv(SshEndpoint("10.0.0.5", 22, "u", Path("/k"), Path("/h"), "/home/u/gpuorch/run", c))
    assert ssh[-1].startswith("if [ -t 0 ]; then exec ") and shlex.join([*c.runtime, "exec", "-i", "-t", NAME]) \
        in ssh[-1]


def test_only_this_attempt_s_container_and_a_runtime_the_agent_may_use_are_trusted():
    names = {container_name(7, 1, phase, 0, "0123456789ab") for phase in ("setup", "running")}
    lines = [{"runtime": ["podman"], "name": container_name(7, 1, "setup", 0, "0123456789ab")},
             {"runtime": ["docker"], "name": NAME},
             {"runtime": ["sh", "-c", "rm -rf ~"], "name": NAME},  # written by the job: not run
             {"runtime": ["podman"], "name": container_name(8, 1, "running", 0, "0123456789ab")},  # another job
             "not json {", {"runtime": "podman", "name": NAME}]
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    assert find_container(text, names, DETECTED) == Container(("docker",), NAME)  # the newest trusted one
    assert find_container("", names, DETECTED) is None
    mine = ("podman", "--runtime", "runc")  # this host's configured runtime (the local provider's)
    text = json.dumps({"runtime": list(mine), "name": NAME})
    assert find_container(text, names, DETECTED) is None and find_container(text, names, (*DETECTED, mine)) \
        == Container(mine, NAME)


def test_where_the_instance_is_the_job_s_image_there_is_no_container_to_enter(tmp_path):
    from gpuorch.devbox.remote import _in_image
    from gpuorch.provider.gang_cloud import GangRunner
    from gpuorch.provider.localdir.runner import LocalRunner
    from gpuorch.runners.inimage import InImageRunner

    node = LocalRunner(tmp_path / "node0")
    assert _in_image(InImageRunner(node)) and _in_image(GangRunner([InImageRunner(node)], 1, 29500))
    assert not _in_image(node) and not _in_image(GangRunner([node], 1, 29500))


def podman_shim(where: Path) -> Path:
    """A ``podman`` that runs this machine's podman with the flags it needs (runc, cgroupfs,
    ulimits: tests/workloads/podman_image.py), as an instance's runtime needs none."""
    where.mkdir(parents=True, exist_ok=True)
    real = shutil.which("podman")
    flags, limits = " ".join(PODMAN[1:]), " ".join(ULIMITS)
    (where / "podman").write_text("#!/bin/sh\n"
                                  f'if [ "$1" = run ]; then shift; exec {real} {flags} run {limits} "$@"; fi\n'
                                  f'exec {real} {flags} "$@"\n')
    (where / "podman").chmod(0o755)
    return where


class Borrowed:
    """The daemon's own provider, lent to ``gpuorch ssh`` in this process (its ``runner_options``
    hook points the runner at the test's sshd; a provider built from the configuration would
    not have it); ``close`` leaves it open."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def close(self) -> None:
        pass


@pytest.mark.lambdalabs
@pytest.mark.container
@pytest.mark.timeout(300)
def test_ssh_runs_in_a_container_job_s_container_over_real_sshd(tmp_path, monkeypatch):
    """Lambda (the fake API; the VM a real sshd from the launch's cloud-config, as in
    tests/lambdalabs/test_lambda_image.py), whose agent runs the job's image with the host's podman."""
    why = unavailable()
    if why:
        pytest.skip(why)
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no real ~/.lambda_cloud is read
    image = build_image(tmp_path / "image")
    shim = podman_shim(tmp_path / "shim")
    remote, where, servers, names = tmp_path / "remote", {}, [], []
    fake = FakeLambda().start()
    config = {"providers": {"lambda": {"endpoint": fake.url, "ssh_user": getpass.getuser()}}}
    try:
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            lam = d.adapter("lambda")
            lam._runner_options = lambda inst: {
                "host": "127.0.0.1", "port": where["port"], "python": sys.executable, "remote_root": str(remote),
                "connect_attempts": 1, "retry_wait_s": 0.05,
                "agent_env": {"PATH": f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"}}
            monkeypatch.setattr("gpuorch.registry.load_providers", lambda options, home: {"lambda": Borrowed(lam)})
            monkeypatch.setenv("GPUORCH_HOME", str(d.config.home))  # the CLI's store is the daemon's
            cfg = ["--config", str(d.config.home / "daemon-config.yaml")]
            job = d.submit({"name": "boxed", "image": image, "providers": ["lambda"], "resources": {"gpu": "A10:1"},
                            "run": "sleep 300"})
            d.until(lambda: fake.launches, timeout_s=60, what="the launch")
            doc = yaml.safe_load(fake.launches[-1]["user_data"].removeprefix("#cloud-config\n"))
            server = Sshd(tmp_path / "vm", doc["ssh_keys"]["ed25519_private"], doc["ssh_authorized_keys"])
            # The VM's login shell (bash, which sources ~/.bashrc for sshd's commands) finds the
            # shim, so `podman exec` of a session has the flags this machine needs, as `run` had.
            (server.dir / "home" / ".bashrc").write_text(f"export PATH={shlex.quote(str(shim))}:$PATH\n")
            try:
                server.start()
            except SshdUnavailable as e:
                pytest.skip(str(e))
            servers.append(server)
            where["port"] = server.port
            fake.advance(5)

            def container() -> SshEndpoint | None:
                try:
                    _, ep = endpoint(d.config, "boxed", container="require")
                except UserInputError:  # not running, or its container not started yet
                    return None
                assert isinstance(ep, SshEndpoint)
                return ep

            ep = d.until(container, timeout_s=180, what="the job's container")
            assert d.status(job) == JobStatus.RUNNING and ep.container is not None
            names.append(ep.container.name)
            assert ep.container == Container(("podman",), container_name(job, 1, "running", 0,
                                                                          d.store.installation_id))

            r = runner.invoke(app, [*cfg, "ssh", "boxed", "--", "sh", "-c",
                                    'test -e /run/.containerenv && echo "in the container at $PWD"; exit 4'])
            assert r.exit_code == 4, r.output
            assert f"in the container at {ep.run_dir}/work" in r.output

            r = runner.invoke(app, [*cfg, "ssh", "--host", "boxed", "--", "sh", "-c",
                                    "test -e /run/.containerenv || echo on the host"])
            assert r.exit_code == 0 and "on the host" in r.output, r.output

            # the interactive shell: what `gpuorch ssh boxed` execs (the system ssh; no terminal
            # here, so the runtime's exec without -t)
            shell = subprocess.run(interactive_argv(ep), input=b"test -e /run/.containerenv && echo inside; exit 5\n",
                                   capture_output=True, timeout=120)
            assert shell.returncode == 5, shell.stderr
            assert shell.stdout.decode().strip() == "inside"

            d.service.cancel("boxed")
            d.until_terminal(job)
    finally:
        for name in names:  # a container outlives its killed runtime client
            subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True, check=False)
        for server in servers:
            server.stop()
        fake.stop()


@pytest.mark.container
@pytest.mark.timeout(300)
def test_ssh_runs_in_the_container_of_a_local_job_with_this_host_s_runtime(tmp_path, monkeypatch):
    why = unavailable()
    if why:
        pytest.skip(why)
    image = build_image(tmp_path / "image")
    c = local_container()
    config = {"providers": {"local": {"container": {"runtime": c.runtime, "run_args": c.run_args, "gpus": c.gpus}}}}
    names: list[str] = []
    try:
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            monkeypatch.setenv("GPUORCH_HOME", str(d.config.home))
            cfg = ["--config", str(d.config.home / "daemon-config.yaml")]
            job = d.submit({"name": "local-boxed", "image": image, "run": "sleep 300",
                            "resources": {"gpu": "A100:80GB:1"}})

            def container() -> LocalEndpoint | None:
                try:
                    _, ep = endpoint(d.config, "local-boxed", container="require")
                except UserInputError:
                    return None
                assert isinstance(ep, LocalEndpoint)
                return ep

            ep = d.until(container, timeout_s=120, what="the job's container")
            assert ep.container == Container(tuple(PODMAN), container_name(job, 1, "running", 0,
                                                                           d.store.installation_id))
            names.append(ep.container.name)
            # a process of its own: the local session's output is this process's stdout, a real file
            r = subprocess.run([sys.executable, "-m", "gpuorch", *cfg, "ssh", "local-boxed", "--", "sh", "-c",
                                'test -e /run/.containerenv && echo "in the container at $PWD"; exit 4'],
                               capture_output=True, timeout=120)
            assert r.returncode == 4, r.stderr
            assert f"in the container at {ep.run_dir}/work" in r.stdout.decode()
            d.service.cancel("local-boxed")
            d.until_terminal(job)
    finally:
        for name in names:
            subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True, check=False)
