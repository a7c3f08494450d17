"""``providers.ssh`` refused by rule: each malformed option is one line naming
``providers.ssh.<field>`` (``hosts[i].<field>``) and its fix, and the daemon exits 2 without
starting; ``gpuorch doctor`` checks every host (reachable, host key, GPUs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pool_harness import PoolHost

from gpuorch.errors import UserInputError
from gpuorch_ssh.config import parse_address
from gpuorch_ssh.provider import SshPoolProvider

pytestmark = pytest.mark.sshpool
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def good(key: Path) -> dict[str, Any]:
    return {"hosts": [{"host": "ops@gpu1.lab:2222", "key": str(key), "host_key": KEY, "gpus": "A100:80GB:4"}]}


def host(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(opts: dict[str, Any]) -> None:
        for k, v in fields.items():
            if v is None:
                opts["hosts"][0].pop(k)
            else:
                opts["hosts"][0][k] = v
    return change


def pool(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda opts: opts.update(fields)


def second_host(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda opts: opts["hosts"].append({**opts["hosts"][0], **fields})


BAD = [
    # host: user@host:port by rule (hostname labels or [v6], port 1-65535), nothing a shell would read
    (host(host="ops@gpu1.lab:0"), "hosts[0].host"), (host(host="ops@gpu1.lab:65536"), "hosts[0].host"),
    (host(host="ops@gpu 1"), "hosts[0].host"), (host(host="ops@-gpu1"), "hosts[0].host"),
    (host(host="ops@gpu1;reboot"), "hosts[0].host"), (host(host="$(id)@gpu1"), "hosts[0].host"),
    (host(host="ops@"), "hosts[0].host"), (host(host=""), "hosts[0].host"), (host(host=22), "hosts[0].host"),
    (host(host="ops@gpu1:22:22"), "hosts[0].host"), (host(host=None), "hosts[0].host"),
    (host(proxy_jump="bastion:99999"), "hosts[0].proxy_jump"),
    (host(key=None), "hosts[0].key"), (host(key="/nonexistent/id_ed25519"), "hosts[0].key"),
    (host(host_key="ssh-ed25519 not-base64!"), "hosts[0].host_key"), (host(host_key="hello"), "hosts[0].host_key"),
    (host(host_key=[]), "hosts[0].host_key"),
    (host(host_key=None), "hosts[0].host_key"),  # and no known_hosts entry for it: nothing to verify against
    (host(gpus="A100:80GB:0"), "hosts[0].gpus"), (host(gpus="A100:80GB:65"), "hosts[0].gpus"),
    (host(gpus="NoSuchGPU:2"), "hosts[0].gpus"), (host(gpus="A100:7GB:2"), "hosts[0].gpus"),
    (host(gpus="A100:80GB:2:2"), "hosts[0].gpus"), (host(gpus=4), "hosts[0].gpus"),
    (host(price_per_gpu_hour=-1), "hosts[0].price_per_gpu_hour"),
    (host(price_per_gpu_hour=float("nan")), "hosts[0].price_per_gpu_hour"),
    (host(price_per_gpu_hour=float("inf")), "hosts[0].price_per_gpu_hour"),
    (host(price_per_gpu_hour=1e20), "hosts[0].price_per_gpu_hour"),
    (host(price_per_gpu_hour=True), "hosts[0].price_per_gpu_hour"),
    (host(price_per_gpu_hour="2"), "hosts[0].price_per_gpu_hour"),
    (host(remote_root="relative/dir"), "hosts[0].remote_root"), (host(remote_root="/a/../b"), "hosts[0].remote_root"),
    (host(remote_root="/a\nb"), "hosts[0].remote_root"),
    (host(name="has space"), "hosts[0].name"), (host(python="python3\n"), "hosts[0].python"),
    (host(colour="red"), "hosts[0].colour"),
    (second_host(), "hosts[1].host"), (second_host(host="ops@other:22", name="gpu1.lab:2222"), "hosts[1].name"),
    (pool(hosts=[]), "hosts"), (pool(hosts="gpu1"), "hosts"),
    (pool(price_per_gpu_hour=-0.5), "price_per_gpu_hour"),
    (pool(price_per_gpu_hour=float("nan")), "price_per_gpu_hour"),
    (pool(silent_after_s=0), "silent_after_s"), (pool(check_interval_s=1e9), "check_interval_s"),
    (pool(connect_timeout_s=False), "connect_timeout_s"), (pool(stop_grace_s=-1), "stop_grace_s"),
    (pool(region="a b"), "region"), (pool(remote_root="tmp"), "remote_root"), (pool(colour="red"), "colour"),
]


@pytest.mark.parametrize(("change", "field"), BAD)
def test_bad_options_are_one_line_naming_the_field(tmp_path: Path, change: Callable[[dict[str, Any]], None],
                                                   field: str):
    key = tmp_path / "id_ed25519"
    key.write_text("not read before a connection")
    opts = {**good(key), "known_hosts": str(tmp_path / "known_hosts")}
    opts["hosts"] = [dict(h) for h in opts["hosts"]]
    change(opts)
    with pytest.raises(UserInputError) as e:
        SshPoolProvider.from_config(opts, tmp_path / "home")
    message = str(e.value)
    assert message.startswith(f"providers.ssh.{field}: "), message
    assert "\n" not in message and "; " in message, message  # one line, with its fix after the problem


def test_good_options_and_addresses(tmp_path: Path):
    key = tmp_path / "id_ed25519"
    key.write_text("x")
    provider = SshPoolProvider.from_config(good(key), tmp_path / "home")
    (h,) = provider.hosts.values()
    assert (h.address.user, h.address.host, h.address.port, h.gpus and h.gpus.gpu) == ("ops", "gpu1.lab", 2222,
                                                                                         "A100-80GB")
    assert h.price_per_gpu_hour == 0 and provider.capabilities.owned_capacity
    assert parse_address("[fe80::1]:2200").key == "[fe80::1]:2200" and parse_address("gpu1").port == 22
    offers = SshPoolProvider.catalog_offers(good(key), tmp_path / "home")
    assert sorted(o.gpu_count for o in offers) == [1, 2, 3, 4] and {o.price_per_hour for o in offers} == {0}
    provider.close()


def test_a_known_hosts_entry_is_a_trusted_key(tmp_path: Path):
    key = tmp_path / "id_ed25519"
    key.write_text("x")
    known = tmp_path / "known_hosts"
    known.write_text(f"[gpu1.lab]:2222 {KEY}\n")
    opts = good(key)
    del opts["hosts"][0]["host_key"]
    SshPoolProvider.from_config({**opts, "known_hosts": str(known)}, tmp_path / "home").close()


def run_cli(home: Path, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = home / "config.yaml"
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "GPUORCH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "gpuorch", "--config", str(path), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_daemon_refuses_a_bad_pool_in_one_line_and_exit_2(tmp_path: Path):
    key = tmp_path / "id_ed25519"
    key.write_text("x")
    opts = good(key)
    opts["hosts"][0]["price_per_gpu_hour"] = -3
    done = run_cli(tmp_path / "home", {"providers": {"ssh": opts}}, "daemon", "--once")
    assert done.returncode == 2, done
    (line,) = done.stderr.strip().splitlines()
    assert "providers.ssh.hosts[0].price_per_gpu_hour" in line


def test_doctor_checks_every_host(tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                                  pool_options: Callable[..., dict[str, Any]]):
    """A good host, one whose key does not match its pin, one that does not answer: ok, fail, fail."""
    good_host, wrong_key, dead = start_hosts(3)
    opts = pool_options([good_host, wrong_key, dead])
    opts["hosts"][1]["host_key"] = good_host.host_public  # not the key this host offers
    dead.sshd.stop()
    done = run_cli(tmp_path / "home", {"providers": {"ssh": opts}}, "doctor", "--json")
    assert done.returncode == 1, done
    found = {f["check"]: f for f in json.loads(done.stdout)["findings"]}
    assert found["ssh host host0"]["status"] == "ok" and "verified" in found["ssh host host0"]["message"]
    assert found["ssh host host0 GPUs"]["status"] == "ok" and "2 x A100-80GB" in found["ssh host host0 GPUs"]["message"]
    assert found["ssh host host1"]["status"] == "fail" and "host key" in found["ssh host host1"]["message"]
    assert "console" in found["ssh host host1"]["fix"]
    assert found["ssh host host2"]["status"] == "fail" and "reachable" in found["ssh host host2"]["fix"]
