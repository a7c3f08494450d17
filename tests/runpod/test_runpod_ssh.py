"""The SSH runner over a pod's public IP and mapped port, its host key verified: the fake stands
a real sshd in for each pod's container, started from the pod's env as the pod's start command
would (the attempt's host key, the job's login key). A pod offering another host key is refused."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_runpod import KEY, FakeRunpod

from gpuorch.provider import LaunchRequest
from gpuorch.runners.keys import ensure_host_key
from gpuorch.runners.port import RunnerUnavailable
from gpuorch_runpod.config import parse_options
from gpuorch_runpod.provider import RunpodProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
from sshd import Sshd, SshdUnavailable

pytestmark = pytest.mark.runpod


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[tuple[FakeRunpod, list[Sshd], dict[str, str]]]:
    servers: list[Sshd] = []
    swap: dict[str, str] = {}  # pod name -> another host key to offer instead (a man in the middle)

    def boot(pod_id: str, env: dict[str, str]) -> int:
        host_key = swap.get(env["GPUORCH_JOB"], env["GPUORCH_SSH_HOST_KEY"])
        try:
            server = Sshd(tmp_path / "pods" / pod_id, host_key, [env["PUBLIC_KEY"]]).start()
        except SshdUnavailable as e:
            pytest.skip(f"no sshd: {e}")
        servers.append(server)
        return server.port

    fake = FakeRunpod(sshd_factory=boot).start()
    yield fake, servers, swap
    fake.stop()
    for s in servers:
        s.stop()


def _provider(fake: FakeRunpod, home: Path) -> RunpodProvider:
    opts = parse_options({"api_url": fake.url, "ssh_user": getpass.getuser()})
    return RunpodProvider(opts, KEY, home=home, sleep=lambda s: None, runner_options=lambda inst: {
        "python": sys.executable, "remote_root": str(home / "remote"), "connect_attempts": 1, "retry_wait_s": 0.05})


def test_the_runner_reaches_the_pod_at_its_mapped_port_with_the_pinned_host_key(pods, tmp_path: Path) -> None:
    fake, servers, _ = pods
    rp = _provider(fake, tmp_path / "home")
    offer = next(o for o in rp.offers() if o.gpu == "RTX4090" and o.gpu_count == 1)
    inst = rp.get(rp.launch(LaunchRequest(job_id=3, attempt=1, offer=offer, spot=False)).id)
    assert (inst.host, inst.port) == ("127.0.0.1", servers[0].port)
    runner = rp.runner(inst)
    assert runner.status() is None  # connected, host key verified; the agent has written nothing yet
    rp.close()


def test_a_pod_offering_another_host_key_is_not_trusted(pods, tmp_path: Path) -> None:
    fake, _, swap = pods
    home = tmp_path / "home"
    swap["4"] = ensure_host_key(tmp_path / "elsewhere", 4, 1)[0]
    rp = _provider(fake, home)
    offer = next(o for o in rp.offers() if o.gpu == "RTX4090" and o.gpu_count == 1)
    inst = rp.get(rp.launch(LaunchRequest(job_id=4, attempt=1, offer=offer, spot=False)).id)
    with pytest.raises(RunnerUnavailable) as e:
        rp.runner(inst).status()
    assert "host key" in str(e.value).lower(), e.value
    rp.close()
