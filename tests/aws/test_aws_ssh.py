"""The SSH wiring: keys in the user data at launch, a runner with the host key pinned."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuorch.provider.port import Instance, InstanceState, LaunchRequest, Offer
from gpuorch.runners.hostkeys import known_hosts_path, pinned_host_key
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.runners.ssh import SshRunner

pytestmark = pytest.mark.aws

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake someone@laptop"


def user_data_of(ec2: Any, instance_id: str) -> dict[str, Any]:
    value = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    text = base64.b64decode(value).decode()
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text)


def test_launch_hands_the_host_key_and_login_keys_to_cloud_init_and_the_runner_pins_it(
    make_provider: Any, moto_offers: list[Offer], ec2: Any, tmp_path: Path
) -> None:
    provider = make_provider(home=tmp_path)
    offer = next(o for o in moto_offers if o.region == "us-east-1")
    inst = provider.launch(LaunchRequest(job_id=7, attempt=2, offer=offer, spot=True, ssh_public_key=KEY))
    doc = user_data_of(ec2, inst.id)
    assert doc["ssh_deletekeys"] is True and doc["ssh_genkeytypes"] == []
    host_public = doc["ssh_keys"]["ed25519_public"]
    job_key = tmp_path / "keys" / "job-7" / "id_ed25519"
    assert doc["ssh_authorized_keys"][0] == (job_key.parent / "id_ed25519.pub").read_text().strip()
    assert doc["ssh_authorized_keys"][1] == KEY
    assert stat.S_IMODE(job_key.stat().st_mode) == 0o600

    running = provider.get(inst.id)
    assert running.host
    runner = provider.runner(running)
    assert isinstance(runner, SshRunner) and provider.runner(running) is runner  # kept between passes
    assert (runner.connection.host, runner.connection.port, runner.connection.user) == (running.host, 22, "ubuntu")
    assert runner.connection.key_path == job_key
    assert runner.notice.kind == "aws"  # the agent polls IMDS for the spot notice
    pinned = pinned_host_key(known_hosts_path(tmp_path), running.host, 22)
    assert pinned is not None and host_public.startswith(pinned)

    provider.terminate(inst.id)
    assert pinned_host_key(known_hosts_path(tmp_path), running.host, 22) is None


def test_no_runner_before_the_instance_has_an_address_or_without_a_home(make_provider: Any, tmp_path: Path) -> None:
    booting = Instance(id="i-1", provider="aws", region="us-east-1", zone="us-east-1a", instance_type="g5.xlarge",
                       spot=False, state=InstanceState.PENDING, tags={"gpuorch:job": "7", "gpuorch:attempt": "1"})
    with pytest.raises(RunnerUnavailable, match="no address yet"):
        make_provider(home=tmp_path).runner(booting)
    with pytest.raises(NotImplementedError, match="without a home"):
        make_provider().runner(booting)


def test_runner_options_override_the_address_and_runner_settings_per_instance(
    moto: None, moto_offers: list[Offer], tmp_path: Path, session: Any
) -> None:
    from moto_helpers import REGIONS, static_prices

    from gpuorch_aws import AwsProvider
    from gpuorch_aws.config import parse_options

    seen: list[str] = []

    def options(instance: Instance) -> dict[str, Any]:
        seen.append(instance.id)
        return {"host": "127.0.0.1", "port": 2222, "python": "/opt/py/bin/python3", "remote_root": "/srv/gpuorch"}

    provider = AwsProvider(parse_options({"regions": REGIONS, "ssh_user": "me"}), home=tmp_path, session=session,
                           prices=static_prices, runner_options=options)
    offer = next(o for o in moto_offers if o.region == "us-east-1")
    inst = provider.get(provider.launch(LaunchRequest(job_id=8, attempt=1, offer=offer, spot=True)).id)
    runner = provider.runner(inst)
    assert isinstance(runner, SshRunner) and seen == [inst.id]
    c = runner.connection
    assert (c.host, c.port, c.user) == ("127.0.0.1", 2222, "me")
    assert (runner.python, runner.remote_root) == ("/opt/py/bin/python3", "/srv/gpuorch")
    assert pinned_host_key(known_hosts_path(tmp_path), "127.0.0.1", 2222) is not None
    assert pinned_host_key(known_hosts_path(tmp_path), inst.host, 22) is None
    provider.terminate(inst.id)
    assert pinned_host_key(known_hosts_path(tmp_path), "127.0.0.1", 2222) is None
