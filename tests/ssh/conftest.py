"""Fixtures for the SSH runner tests: one real sshd per session (tests/ssh/sshd.py), a pinned
known_hosts file and a runner factory per test. The "instance" is this host, reached over SSH,
so tests may also inspect the remote files directly."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "s3"))  # the shared moto S3 helper
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gcs"))  # the shared GCS emulator helper
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "azblob"))  # the shared Azurite helper

from ssh_harness import Keys, kill_job
from sshd import Sshd, SshdUnavailable

from gpuorch.agent.protocol import NoticeSource
from gpuorch.runners.hostkeys import pin_host_key
from gpuorch.runners.keys import ensure_host_key, ensure_job_key
from gpuorch.runners.ssh import SshRunner


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    home = tmp_path_factory.mktemp("ssh-home")
    job_key, job_public = ensure_job_key(home, 1)
    host_private, host_public = ensure_host_key(home, 1, 1)
    return Keys(job_key, job_public, host_private, host_public)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Sshd]:
    try:
        server = Sshd(tmp_path_factory.mktemp("sshd"), keys.host_private, [keys.job_public]).start()
    except SshdUnavailable as e:
        pytest.skip(f"no sshd for the SSH runner tests: {e}")
    yield server
    server.stop()


@pytest.fixture
def known_hosts(tmp_path: Path, sshd: Sshd, keys: Keys) -> Path:
    """The installation's known_hosts with the sshd's key pinned (the daemon made that key)."""
    path = tmp_path / "known_hosts"
    pin_host_key(path, "127.0.0.1", sshd.port, keys.host_public)
    return path


@pytest.fixture
def make_runner(tmp_path: Path, sshd: Sshd, keys: Keys, known_hosts: Path) -> Iterator[Callable[..., SshRunner]]:
    """``make_runner(**SshRunner keyword overrides)``: a runner for the sshd, fast retries,
    the remote root under tmp_path, this venv's python (boto3 importable), no notice source."""
    runners: list[SshRunner] = []

    def make(**overrides: Any) -> SshRunner:
        kwargs: dict[str, Any] = {
            "host": "127.0.0.1", "port": sshd.port, "user": sshd.user, "key_path": keys.job_key,
            "known_hosts_path": known_hosts, "remote_root": str(tmp_path / "remote"), "python": sys.executable,
            "notice": NoticeSource(kind="none"), "connect_attempts": 2, "retry_wait_s": 0.05, "connect_timeout": 5,
        }
        kwargs.update(overrides)
        runner = SshRunner(**kwargs)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()
        kill_job(Path(runner.remote_root) / "run")
