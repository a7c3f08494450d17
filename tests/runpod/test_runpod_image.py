"""An ``image:`` job on RunPod through the assembled daemon: the pod is deployed from the job's image
(the fake records ``imageName``), and the job runs under the real agent inside the pod, without a
container runtime (the pod is the container). The fake stands a real sshd in for each pod, started
from the pod's env as the pod's start command would; the daemon's SSH runner reaches it with the
pinned host key and starts the agent there (only the runner's Python and remote root are set)."""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_runpod import FakeRunpod

from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
from sshd import Sshd, SshdUnavailable

pytestmark = [pytest.mark.runpod, pytest.mark.timeout(300)]
IMAGE = "ghcr.io/acme/qlora-train:1.4"


@pytest.fixture
def sshd_fake(tmp_path: Path) -> Iterator[FakeRunpod]:
    servers: list[Sshd] = []

    def boot(pod_id: str, env: dict[str, str]) -> int:
        try:
            server = Sshd(tmp_path / "pods" / pod_id, env["GPUORCH_SSH_HOST_KEY"], [env["PUBLIC_KEY"]]).start()
        except SshdUnavailable as e:
            pytest.skip(f"no sshd: {e}")
        servers.append(server)
        return server.port

    fake = FakeRunpod(sshd_factory=boot).start()
    yield fake
    fake.stop()
    for s in servers:
        s.stop()


def test_an_image_job_runs_in_a_pod_started_from_its_image_under_the_agent(tmp_path: Path,
                                                                           sshd_fake: FakeRunpod) -> None:
    remote = tmp_path / "remote"
    config = {"providers": {"runpod": {"api_url": sshd_fake.url, "ssh_user": getpass.getuser()}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        runpod = d.adapter("runpod")
        assert runpod.capabilities.runs_containers
        shipped = runpod._runners.options
        runpod._runners.options = lambda inst: {**shipped(inst), "python": sys.executable, "remote_root": str(remote),
                                                "connect_attempts": 1, "retry_wait_s": 0.05}
        out = tmp_path / "ran.txt"
        job = d.submit({"name": "img", "image": IMAGE, "run": f'echo "attempt $GPUORCH_ATTEMPT" > {out}',
                        "resources": {"gpu": "RTX4090:1"}, "spot_policy": "on-demand", "providers": ["runpod"]})
        assert d.until_terminal(job, timeout_s=120).status == JobStatus.SUCCEEDED
        assert out.read_text() == "attempt 1\n"  # run directly in the pod: no runtime to pull IMAGE with
        [agent_json] = remote.rglob("agent.json")
        started = json.loads(agent_json.read_text())
        assert started["container"] is None  # the pod is the container
        assert started["shutdown_command"] == "kill -TERM 1"  # the dead-man switch ends the pod
    assert sshd_fake.deployed_images == [IMAGE]
