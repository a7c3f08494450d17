"""An ``image:`` job on Lambda through the assembled daemon: Lambda starts a VM (the fake's
instance), and the agent runs the job's image with the host's container runtime, over the real SSH
runner. The VM is a real sshd started from the launch's cloud-config (host key, login key), as in
``test_lambda_ssh.py``; its container runtime is this machine's podman, reached through a
``podman`` on the agent's PATH that adds the flags this test machine needs (the runc runtime,
cgroupfs, ulimits: tests/workloads/podman_image.py), as a Lambda Stack host's Docker needs none.
The job checks that it runs inside the container (``/run/.containerenv``)."""

from __future__ import annotations

import getpass
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_lambda import FakeLambda

from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))
from podman_image import PODMAN, ULIMITS, build_image, unavailable
from sshd import Sshd, SshdUnavailable

pytestmark = [pytest.mark.lambdalabs, pytest.mark.container, pytest.mark.timeout(300)]


def podman_shim(where: Path) -> Path:
    """A ``podman`` that runs this machine's podman with the flags it needs."""
    where.mkdir(parents=True, exist_ok=True)
    real = shutil.which("podman")
    glob = " ".join(PODMAN[1:])
    (where / "podman").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = run ]; then shift; exec {real} {glob} run {" ".join(ULIMITS)} "$@"; fi\n'
        f'exec {real} {glob} "$@"\n')
    (where / "podman").chmod(0o755)
    return where


def test_an_image_job_runs_in_its_container_on_the_lambda_host(tmp_path: Path, fake: FakeLambda) -> None:
    why = unavailable()
    if why:
        pytest.skip(why)
    image = build_image(tmp_path / "image")
    remote = tmp_path / "remote"
    shim = podman_shim(tmp_path / "shim")
    where: dict[str, Any] = {}
    servers: list[Sshd] = []
    config = {"providers": {"lambda": {"endpoint": fake.url, "ssh_user": getpass.getuser()}}}
    try:
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            lam = d.adapter("lambda")
            lam._runner_options = lambda inst: {
                "host": "127.0.0.1", "port": where["port"], "python": sys.executable, "remote_root": str(remote),
                "connect_attempts": 1, "retry_wait_s": 0.05,
                "agent_env": {"PATH": f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"}}
            job = d.submit({"name": "img", "image": image, "providers": ["lambda"], "resources": {"gpu": "A10:1"},
                            "run": "test -e /run/.containerenv && echo in-container > ran.txt"})
            d.until(lambda: fake.launches, timeout_s=60, what="the launch")
            doc = yaml.safe_load(fake.launches[-1]["user_data"].removeprefix("#cloud-config\n"))
            try:
                server = Sshd(tmp_path / "vm", doc["ssh_keys"]["ed25519_private"], doc["ssh_authorized_keys"]).start()
            except SshdUnavailable as e:
                pytest.skip(str(e))
            servers.append(server)
            where["port"] = server.port
            fake.advance(5)
            done = d.until_terminal(job, timeout_s=180)
            assert done.status == JobStatus.SUCCEEDED, (d.attempts(job), [*remote.rglob("agent.log")])
        [ran] = remote.rglob("ran.txt")
        assert ran.read_text() == "in-container\n"
    finally:
        for s in servers:
            s.stop()
