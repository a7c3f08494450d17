"""Connecting to a real sshd: pinned host keys, refusals, retries while an instance boots."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ssh_harness import Keys
from sshd import Sshd, free_port

from gpuorch.runners.hostkeys import HostKeyRejected, fingerprint, pin_host_key, pin_host_keys
from gpuorch.runners.keys import ensure_host_key, ensure_job_key
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.runners.ssh import SshRunner

pytestmark = pytest.mark.aws


def test_a_pinned_host_is_accepted_and_the_connection_reused(make_runner: Callable[..., SshRunner]):
    runner = make_runner()
    assert runner.status() is None  # connected; no agent yet
    first = runner.connection._client
    assert runner.read_log() == (b"", 0)
    assert runner.connection._client is first  # one connection for many calls


def test_a_dropped_connection_is_reopened(make_runner: Callable[..., SshRunner]):
    runner = make_runner()
    runner.status()
    client = runner.connection._client
    assert client is not None
    client.get_transport().close()  # the network dropped it
    assert runner.status() is None


def test_an_unknown_host_is_refused(make_runner: Callable[..., SshRunner], tmp_path: Path, keys: Keys):
    runner = make_runner(known_hosts_path=tmp_path / "empty_known_hosts", retry_wait_s=5)
    started = time.monotonic()
    with pytest.raises(HostKeyRejected, match=r"no host key pinned for \[127.0.0.1\]:\d+") as info:
        runner.status()
    assert fingerprint(keys.host_public) in str(info.value)
    assert isinstance(info.value, RunnerUnavailable)  # the reconciler tries again on a later pass ...
    assert time.monotonic() - started < 3  # ... but the runner does not retry it (retry_wait_s=5)


def test_a_changed_host_key_is_refused(make_runner: Callable[..., SshRunner], sshd: Sshd, tmp_path: Path,
                                       keys: Keys):
    known = tmp_path / "other_known_hosts"
    impostor = ensure_host_key(tmp_path, 99, 1)[1]  # what we pinned is not what the host offers
    pin_host_key(known, "127.0.0.1", sshd.port, impostor)
    with pytest.raises(HostKeyRejected, match="host key changed") as info:
        make_runner(known_hosts_path=known).status()
    assert fingerprint(impostor) in str(info.value) and fingerprint(keys.host_public) in str(info.value)


def test_a_closed_port_is_retried_then_unavailable(make_runner: Callable[..., SshRunner]):
    runner = make_runner(port=free_port(), connect_attempts=3, retry_wait_s=0.1)
    started = time.monotonic()
    with pytest.raises(RunnerUnavailable, match="unreachable after 3 attempts") as info:
        runner.status()
    assert not isinstance(info.value, HostKeyRejected)
    assert time.monotonic() - started >= 0.3  # two waits of >= 0.1 and 0.2 s


def test_connects_once_the_instance_finishes_booting(make_runner: Callable[..., SshRunner], tmp_path: Path,
                                                    keys: Keys):
    port = free_port()
    booting = Sshd(tmp_path / "booting", keys.host_private, [keys.job_public], port=port)
    known = tmp_path / "known_hosts_booting"
    pin_host_key(known, "127.0.0.1", port, keys.host_public)  # pinned at launch, before sshd is up
    timer = threading.Timer(0.6, booting.start)
    timer.start()
    try:
        runner = make_runner(port=port, known_hosts_path=known, connect_attempts=8, retry_wait_s=0.1)
        assert runner.status() is None
    finally:
        timer.join()
        booting.stop()


def test_a_key_the_host_does_not_accept_is_unavailable(make_runner: Callable[..., SshRunner], tmp_path: Path):
    stranger, _ = ensure_job_key(tmp_path, 42)
    with pytest.raises(RunnerUnavailable, match="authentication failed"):
        make_runner(key_path=stranger).status()


def test_a_missing_login_key_is_unavailable(make_runner: Callable[..., SshRunner], tmp_path: Path):
    with pytest.raises(RunnerUnavailable, match="cannot read the login key"):
        make_runner(key_path=tmp_path / "nope").status()


def _ecdsa_public() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def test_several_pinned_key_types_accept_the_one_the_host_offers(make_runner: Callable[..., SshRunner], sshd: Sshd,
                                                                 tmp_path: Path, keys: Keys):
    # An ecdsa key pinned first, which this host does not have: its ed25519 one is still checked.
    known = tmp_path / "multi_known_hosts"
    pin_host_keys(known, "127.0.0.1", sshd.port, [_ecdsa_public(), keys.host_public])
    assert make_runner(known_hosts_path=known).status() is None
    # ... and a wrong ed25519 key among several types is a refusal, whatever else is pinned.
    pin_host_keys(known, "127.0.0.1", sshd.port, [_ecdsa_public(), ensure_host_key(tmp_path, 98, 1)[1]])
    with pytest.raises(HostKeyRejected, match="host key changed"):
        make_runner(known_hosts_path=known).status()


def test_before_connect_runs_before_each_new_connection(make_runner: Callable[..., SshRunner], tmp_path: Path):
    calls: list[int] = []

    def not_yet() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RunnerUnavailable("not ready yet")

    runner = make_runner(before_connect=not_yet)
    with pytest.raises(RunnerUnavailable, match="not ready yet"):
        runner.status()
    assert runner.status() is None and runner.status() is None  # the second connection is kept
    assert len(calls) == 2
