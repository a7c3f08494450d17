"""Key material and pinning without a server: job keys, host keys, known_hosts pins, the bundle."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import paramiko
import pytest

from gpuorch.runners.bundle import agent_bundle
from gpuorch.runners.hostkeys import (
    fingerprint,
    host_pattern,
    pin_host_key,
    pin_host_keys,
    pinned_host_key,
    pinned_host_keys,
    unpin_host_key,
)
from gpuorch.runners.keys import (
    cloud_config_ssh,
    delete_job_keys,
    ensure_host_key,
    ensure_job_key,
)

pytestmark = pytest.mark.aws


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_job_key_is_private_stable_and_usable(tmp_path: Path):
    private, public = ensure_job_key(tmp_path, 7)
    assert private == tmp_path / "keys" / "job-7" / "id_ed25519"
    assert mode(private) == 0o600 and mode(private.parent) == 0o700
    assert public.startswith("ssh-ed25519 AAAA") and public.endswith(" gpuorch-job-7")
    assert (private.parent / "id_ed25519.pub").read_text() == public + "\n"
    assert private.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    key = paramiko.PKey.from_path(private)  # what the runner logs in with
    assert f"{key.get_name()} {key.get_base64()}" == public.rsplit(" ", 1)[0]
    assert ensure_job_key(tmp_path, 7) == (private, public)  # idempotent
    assert ensure_job_key(tmp_path, 8)[1] != public
    assert [p.name for p in private.parent.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_concurrent_callers_get_the_same_job_key(tmp_path: Path):
    results: list[tuple[Path, str]] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_job_key(tmp_path, 3))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1


def test_host_keys_are_per_attempt_and_stable(tmp_path: Path):
    private, public = ensure_host_key(tmp_path, 7, 1)
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and public.startswith("ssh-ed25519 ")
    assert mode(tmp_path / "keys" / "job-7" / "host-1_ed25519") == 0o600
    assert ensure_host_key(tmp_path, 7, 1) == (private, public)  # a retried launch renders the same user data
    assert ensure_host_key(tmp_path, 7, 2)[1] != public
    delete_job_keys(tmp_path, 7)
    assert not (tmp_path / "keys" / "job-7").exists()
    delete_job_keys(tmp_path, 7)  # quiet


def test_cloud_config_installs_only_the_pinned_host_key(tmp_path: Path):
    host_private, host_public = ensure_host_key(tmp_path, 1, 1)
    _, login = ensure_job_key(tmp_path, 1)
    cfg = cloud_config_ssh(host_private, host_public, login)
    assert cfg["ssh_keys"] == {"ed25519_private": host_private, "ed25519_public": host_public}
    assert cfg["ssh_authorized_keys"] == [login]
    assert cfg["ssh_deletekeys"] is True and cfg["ssh_genkeytypes"] == []


def test_pins_are_known_hosts_lines_that_paramiko_reads(tmp_path: Path):
    known = tmp_path / "known_hosts"
    key_a = ensure_host_key(tmp_path, 1, 1)[1]
    key_b = ensure_host_key(tmp_path, 1, 2)[1]
    assert pin_host_key(known, "10.0.0.5", 22, key_a) is None
    assert pin_host_key(known, "10.0.0.5", 2222, key_b) is None
    assert pin_host_key(known, "10.0.0.5", 22, key_a) == key_a.rsplit(" ", 1)[0]  # idempotent
    lines = known.read_text().splitlines()
    assert lines == [f"10.0.0.5 {key_a.rsplit(' ', 1)[0]}", f"[10.0.0.5]:2222 {key_b.rsplit(' ', 1)[0]}"]
    keys = paramiko.HostKeys(str(known))
    assert keys.lookup(host_pattern("10.0.0.5", 2222))["ssh-ed25519"].get_base64() == key_b.split()[1]


def test_a_new_pin_for_a_reused_address_replaces_the_old_one(tmp_path: Path):
    known = tmp_path / "known_hosts"
    old, new = ensure_host_key(tmp_path, 1, 1)[1], ensure_host_key(tmp_path, 2, 1)[1]
    pin_host_key(known, "10.0.0.5", 22, old)
    pin_host_key(known, "10.0.0.6", 22, old)
    assert pin_host_key(known, "10.0.0.5", 22, new) == " ".join(old.split()[:2])
    assert pinned_host_key(known, "10.0.0.5", 22) == " ".join(new.split()[:2])
    assert pinned_host_key(known, "10.0.0.6", 22) == " ".join(old.split()[:2])  # others untouched
    unpin_host_key(known, "10.0.0.5", 22)
    unpin_host_key(known, "10.0.0.5", 22)
    assert pinned_host_key(known, "10.0.0.5", 22) is None and pinned_host_key(known, "10.0.0.6", 22)


def test_concurrent_pins_are_all_kept(tmp_path: Path):
    known = tmp_path / "known_hosts"
    key = ensure_host_key(tmp_path, 1, 1)[1]
    threads = [threading.Thread(target=pin_host_key, args=(known, f"10.0.0.{i}", 22, key)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(known.read_text().splitlines()) == 20


@pytest.mark.parametrize("bad", ["", "ssh-ed25519", "ssh-dss AAAAB3NzaC1kc3M=", "ssh-ed25519 not-base64!",
                                 "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIA=="])
def test_malformed_keys_are_refused(tmp_path: Path, bad: str):
    with pytest.raises(ValueError):
        pin_host_key(tmp_path / "known_hosts", "h", 22, bad)
    assert not (tmp_path / "known_hosts").exists()


def test_fingerprint_matches_ssh_keygen(tmp_path: Path):
    private, public = ensure_job_key(tmp_path, 1)
    try:
        out = subprocess.run(["ssh-keygen", "-l", "-f", f"{private}.pub"], capture_output=True, text=True, check=True)
    except FileNotFoundError:
        pytest.skip("ssh-keygen is not installed")
    assert out.stdout.split()[1] == fingerprint(public)


def test_the_agent_bundle_is_deterministic_and_self_contained(tmp_path: Path):
    name, data = agent_bundle()
    assert agent_bundle.__wrapped__() == (name, data)  # rebuilt: byte for byte the same
    assert name.startswith("gpuorch-agent-") and name.endswith(".pyz")
    bundle = tmp_path / name
    bundle.write_bytes(data)
    names = zipfile.ZipFile(bundle).namelist()
    assert "gpuorch/agent/agent.py" in names and "gpuorch/checkpoint/sync.py" in names
    assert not [n for n in names if n.startswith(("gpuorch/runners", "gpuorch/cli"))]
    # -S: no site-packages, like a bare python3 on a fresh image; no RUNDIR -> the usage line.
    out = subprocess.run([sys.executable, "-S", str(bundle)], capture_output=True, text=True, cwd=tmp_path,
                         check=False)
    assert out.returncode == 64 and "usage" in out.stderr


def test_several_keys_pinned_for_one_address_replace_all_earlier_pins(tmp_path: Path):
    known = tmp_path / "known_hosts"
    a, b = ensure_host_key(tmp_path, 1, 1)[1], ensure_host_key(tmp_path, 1, 2)[1]
    rsa = paramiko.RSAKey.generate(1024)
    rsa_line = f"ssh-rsa {rsa.get_base64()}"
    pin_host_key(known, "10.0.0.1", 22, a)
    pin_host_key(known, "10.0.0.2", 22, a)
    assert pin_host_keys(known, "10.0.0.1", 22, [rsa_line, b]) == [" ".join(a.split()[:2])]
    assert pinned_host_keys(known, "10.0.0.1", 22) == [rsa_line, " ".join(b.split()[:2])]
    assert pinned_host_keys(known, "10.0.0.2", 22) == [" ".join(a.split()[:2])]  # other addresses kept
    loaded = paramiko.HostKeys(str(known)).lookup("10.0.0.1")
    assert loaded is not None and set(loaded.keys()) == {"ssh-rsa", "ssh-ed25519"}
    with pytest.raises(ValueError, match="one key per key type"):
        pin_host_keys(known, "10.0.0.1", 22, [a, b])
    with pytest.raises(ValueError, match="one key per key type"):
        pin_host_keys(known, "10.0.0.1", 22, [])
    unpin_host_key(known, "10.0.0.1", 22)
    assert pinned_host_keys(known, "10.0.0.1", 22) == []
