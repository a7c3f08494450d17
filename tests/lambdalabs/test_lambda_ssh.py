"""The SSH runner of a Lambda instance against a real sshd (shared/TESTING.md, "SSH"): the sshd
is started with exactly what the launch handed to cloud-init in ``user_data`` (the host key the
daemon made, the job's login key), as the instance's cloud-init would; the provider's
``runner_options`` point the runner at it. The host key is pinned before the first connection,
and a host offering any other key is refused."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_lambda import FakeLambda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
from sshd import Sshd, SshdUnavailable

from gpuorch.provider.port import Instance, LaunchRequest
from gpuorch.runners.hostkeys import HostKeyRejected, known_hosts_path, pinned_host_key
from gpuorch.runners.keys import ensure_host_key
from gpuorch.runners.ssh import SshRunner

pytestmark = pytest.mark.lambdalabs


def boot(fake: FakeLambda, root: Path, host_private: str | None = None) -> Sshd:
    """An sshd configured from the last launch's cloud-config, as cloud-init would configure the VM."""
    doc = yaml.safe_load(fake.launches[-1]["user_data"].removeprefix("#cloud-config\n"))
    try:
        return Sshd(root, host_private or doc["ssh_keys"]["ed25519_private"], doc["ssh_authorized_keys"]).start()
    except SshdUnavailable as e:
        pytest.skip(str(e))


def test_the_runner_connects_to_the_host_whose_key_the_launch_handed_over(make_provider, fake: FakeLambda,
                                                                          tmp_path: Path) -> None:
    where: dict[str, Any] = {}
    p = make_provider(ssh_user=getpass.getuser())
    p._runner_options = lambda inst: {"host": "127.0.0.1", "port": where["port"]}
    offer = next(o for o in p.offers() if o.instance_type == "gpu_1x_a10")
    inst = p.launch(LaunchRequest(job_id=3, attempt=1, offer=offer, spot=False, owner="c0ffee000001"))
    sshd = boot(fake, tmp_path / "sshd")
    try:
        where["port"] = sshd.port
        fake.advance(5)
        running: Instance = p.get(inst.id)
        assert running.host == fake.ip and running.port == 22
        runner = p.runner(running)
        assert isinstance(runner, SshRunner) and runner.notice.kind == "none"
        pinned = pinned_host_key(known_hosts_path(tmp_path), "127.0.0.1", sshd.port)
        assert pinned is not None and ensure_host_key(tmp_path, 3, 1)[1].startswith(pinned)
        assert runner.status() is None  # connected and verified; no agent started yet
        p.terminate(inst.id)
        assert pinned_host_key(known_hosts_path(tmp_path), "127.0.0.1", sshd.port) is None
    finally:
        sshd.stop()


def test_a_host_offering_another_key_is_refused(make_provider, fake: FakeLambda, tmp_path: Path) -> None:
    where: dict[str, Any] = {}
    p = make_provider(ssh_user=getpass.getuser())
    p._runner_options = lambda inst: {"host": "127.0.0.1", "port": where["port"]}
    offer = next(o for o in p.offers() if o.instance_type == "gpu_1x_a10")
    inst = p.launch(LaunchRequest(job_id=4, attempt=1, offer=offer, spot=False, owner="c0ffee000001"))
    impostor, _ = ensure_host_key(tmp_path / "elsewhere", 1, 1)
    sshd = boot(fake, tmp_path / "sshd", host_private=impostor)
    try:
        where["port"] = sshd.port
        fake.advance(5)
        with pytest.raises(HostKeyRejected):
            p.runner(p.get(inst.id)).status()
    finally:
        sshd.stop()
