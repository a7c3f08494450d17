"""GCE host keys: the guest agent may replace the host key gpuorch handed to cloud-init at first
boot, and publishes the keys it ends with as guest attributes (``hostkeys/``). The runner pins
those, read through the Compute API (the real SDK against the fake), with the supplied key,
before it connects; it connects to nothing while none is published (up to ``host_keys_wait_s``).

The "VM" is a real sshd on 127.0.0.1 (tests/ssh/sshd.py) standing in for the instance through
the provider's ``runner_options``, with whatever host key the test gives it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_gce import FakeGce

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))  # the sshd harness

from sshd import Sshd, SshdUnavailable

from gpuorch.provider.port import Instance, LaunchRequest, Offer
from gpuorch.runners.hostkeys import HostKeyRejected, known_hosts_path, pinned_host_keys
from gpuorch.runners.keys import ensure_host_key, ensure_job_key
from gpuorch.runners.port import RunnerUnavailable
from gpuorch_gcp import GcpProvider
from gpuorch_gcp.parse import host_keys

pytestmark = pytest.mark.gcp
ZONE = "us-central1-a"
OFFER = Offer(provider="gcp", region="us-central1", zone=ZONE, instance_type="g2-standard-4", gpu="L4", gpu_count=1,
              gpu_memory_gib=24, price_per_hour=1.0, spot_price_per_hour=0.3)


def key_pair(tmp_path: Path, name: str) -> tuple[str, str]:
    """A host key pair gpuorch did not make (the guest agent's, or an impostor's)."""
    return ensure_host_key(tmp_path / name, 1, 1)


def short(public: str) -> str:
    return " ".join(public.split()[:2])


class Vm:
    """A launched GCE instance and the sshd playing it (started with ``boot(host_private)``)."""

    def __init__(self, provider: GcpProvider, fake: FakeGce, home: Path, root: Path) -> None:
        self.provider, self.fake, self.home, self.root = provider, fake, home, root
        self.inst = provider.launch(LaunchRequest(job_id=7, attempt=1, offer=OFFER, spot=True))
        self.name = self.inst.id.split("/", 1)[1]
        self.supplied = ensure_host_key(home, 7, 1)  # what cloud-init was given
        self.sshd: Sshd | None = None

    def boot(self, host_private: str) -> None:
        _, login = ensure_job_key(self.home, 7)
        try:
            self.sshd = Sshd(self.root / "sshd", host_private, [login]).start()
        except SshdUnavailable as e:
            pytest.skip(f"no sshd: {e}")

    def options(self, instance: Instance) -> dict[str, Any]:
        assert self.sshd is not None
        return {"host": "127.0.0.1", "port": self.sshd.port, "python": sys.executable,
                "remote_root": str(self.root / "remote"), "connect_attempts": 2, "retry_wait_s": 0.05,
                "connect_timeout": 5}

    def pins(self) -> list[str]:
        assert self.sshd is not None
        return pinned_host_keys(known_hosts_path(self.home), "127.0.0.1", self.sshd.port)

    def publish(self, public: str) -> None:
        self.fake.publish_host_key(ZONE, self.name, public)


@pytest.fixture
def vm(make_provider: Callable[..., GcpProvider], fake: FakeGce, tmp_path: Path) -> Iterator[Vm]:
    home = tmp_path / "home"
    holder: list[Vm] = []
    provider = make_provider(home=home, ssh_user=_user(), host_keys_wait_s=300,
                             runner_options=lambda inst: holder[0].options(inst))
    machine = Vm(provider, fake, home, tmp_path)
    holder.append(machine)
    yield machine
    if machine.sshd is not None:
        machine.sshd.stop()


def _user() -> str:
    import getpass

    return getpass.getuser()


def running(vm: Vm) -> Instance:
    return vm.provider.get(vm.inst.id)


# -- the launch ----------------------------------------------------------------------------
def test_the_launch_enables_guest_attributes_and_asks_cloud_init_to_publish_its_key(vm: Vm, fake: FakeGce):
    body = fake.instances[(ZONE, vm.name)]  # what GCE received, through the real SDK
    items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    assert items["enable-guest-attributes"] == "TRUE"
    doc = yaml.safe_load(items["user-data"])
    assert doc["ssh_keys"]["ed25519_public"] == vm.supplied[1]
    assert doc["ssh_publish_hostkeys"] == {"enabled": True}


# -- what the guest published --------------------------------------------------------------
def test_published_keys_are_read_as_openssh_lines(tmp_path: Path):
    ed = key_pair(tmp_path, "agent")[1]
    answer = {"query_value": {"items": [
        {"namespace": "hostkeys", "key": "ssh-ed25519", "value": ed.split()[1]},
        {"namespace": "hostkeys", "key": "ssh-rsa", "value": "not base64!"},  # skipped: not a key
        {"namespace": "hostkeys", "key": "ssh-dss", "value": ed.split()[1]},  # skipped: unknown type
        {"namespace": "other", "key": "ssh-ed25519", "value": "AAAA"},
    ]}}
    assert host_keys(answer) == [short(ed)]
    assert host_keys({"query_value": {"items": [{"namespace": "hostkeys", "key": "ssh-ed25519",
                                                  "value": ed}]}}) == [short(ed)]  # "type blob" values too
    assert host_keys({}) == []


def test_the_runner_pins_the_published_key_and_connects_to_a_vm_whose_key_the_guest_agent_replaced(
    vm: Vm, tmp_path: Path
):
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)  # the guest agent regenerated the host key: not the one gpuorch supplied
    vm.publish(agent_public)
    runner = vm.provider.runner(running(vm))
    assert runner.status() is None  # connected, verified; no agent started yet
    assert vm.pins() == [short(agent_public)]  # the published ed25519 replaced the supplied one


def test_until_the_guest_publishes_the_runner_is_not_ready_and_connects_to_nothing(vm: Vm, fake: FakeGce,
                                                                                    tmp_path: Path):
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)
    runner = vm.provider.runner(running(vm))  # made without a call: the reconciler's pass goes on
    with pytest.raises(RunnerUnavailable, match="not reported its SSH host keys yet"):
        runner.status()
    assert vm.pins() == []
    assert "Accepted publickey" not in vm.sshd.log_text()  # type: ignore[union-attr]
    asked = [p for m, p in fake.requests if p.endswith(f"/instances/{vm.name}/getGuestAttributes")]
    assert len(asked) == 1  # through the Compute API
    fake.advance(299)  # still within host_keys_wait_s (fake clock)
    with pytest.raises(RunnerUnavailable, match="not reported"):
        runner.status()
    vm.publish(agent_public)
    assert runner.status() is None  # the same runner, once published
    assert vm.pins() == [short(agent_public)]


def test_published_keys_are_ignored_without_guest_attributes_enabled(vm: Vm, fake: FakeGce, tmp_path: Path):
    # GCE serves them only with enable-guest-attributes: TRUE (the fake checks the launch's metadata).
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)
    vm.publish(agent_public)
    fake.instances[(ZONE, vm.name)]["metadata"]["items"] = [
        i for i in fake.instances[(ZONE, vm.name)]["metadata"]["items"] if i["key"] != "enable-guest-attributes"]
    with pytest.raises(RunnerUnavailable, match="not reported"):
        vm.provider.runner(running(vm)).status()


def test_neither_trusted_key_matching_is_a_refusal(vm: Vm, tmp_path: Path):
    impostor_private, _ = key_pair(tmp_path, "impostor")
    _, agent_public = key_pair(tmp_path, "agent")
    vm.boot(impostor_private)  # a man in the middle: offers neither the supplied nor the published key
    vm.publish(agent_public)
    with pytest.raises(HostKeyRejected, match="host key changed"):
        vm.provider.runner(running(vm)).status()


def test_without_published_keys_after_the_wait_only_the_supplied_key_is_trusted(vm: Vm, fake: FakeGce,
                                                                                   tmp_path: Path):
    vm.boot(vm.supplied[0])  # an image whose guest never publishes; cloud-init installed our key
    runner = vm.provider.runner(running(vm))
    with pytest.raises(RunnerUnavailable, match="not reported"):
        runner.status()
    fake.advance(301)
    assert runner.status() is None
    assert vm.pins() == [short(vm.supplied[1])]


def test_a_vm_not_offering_the_supplied_key_is_refused_once_the_wait_is_over(vm: Vm, fake: FakeGce,
                                                                            tmp_path: Path):
    agent_private, _ = key_pair(tmp_path, "agent")
    vm.boot(agent_private)  # replaced, but never published: nothing vouches for this key
    fake.advance(301)
    with pytest.raises(HostKeyRejected):
        vm.provider.runner(running(vm)).status()


def test_a_key_published_later_replaces_the_pin_at_the_next_connection(vm: Vm, tmp_path: Path):
    # cloud-init published the supplied key first; the guest agent then replaced it on disk and
    # published its own. A pin made in between is refused once, then made again from the API.
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)
    vm.publish(vm.supplied[1])
    runner = vm.provider.runner(running(vm))
    with pytest.raises(HostKeyRejected):
        runner.status()
    vm.publish(agent_public)
    assert runner.status() is None
    assert vm.pins() == [short(agent_public)]


def test_several_published_key_types_are_all_pinned(vm: Vm, tmp_path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ecdsa = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)  # this sshd offers only the ed25519 one
    vm.publish(ecdsa)
    vm.publish(agent_public)
    assert vm.provider.runner(running(vm)).status() is None
    assert sorted(vm.pins()) == sorted([short(ecdsa), short(agent_public)])


def test_terminate_unpins_every_key(vm: Vm, tmp_path: Path):
    agent_private, agent_public = key_pair(tmp_path, "agent")
    vm.boot(agent_private)
    vm.publish(agent_public)
    vm.provider.runner(running(vm)).status()
    vm.provider.terminate(vm.inst.id)
    assert vm.pins() == []
