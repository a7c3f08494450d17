"""Fixtures of the SSH node pool tests: several real sshd instances on 127.0.0.1, one port per
"host" (tests/ssh/sshd.py; shared/TESTING.md "SSH"), each with its own host key; one login key;
each host's remote root a directory of its own, so a test can kill exactly one host's processes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))  # the shared throwaway sshd

from pool_harness import PoolHost, PoolKeys, kill_host_processes
from sshd import Sshd, SshdUnavailable

from gpuorch.runners.keys import ensure_host_key, ensure_job_key

pytestmark = pytest.mark.sshpool


@pytest.fixture(scope="session")
def pool_keys(tmp_path_factory: pytest.TempPathFactory) -> PoolKeys:
    home = tmp_path_factory.mktemp("pool-keys")
    login, login_public = ensure_job_key(home, 1)
    hosts = [ensure_host_key(home, 1, i + 1) for i in range(4)]
    return PoolKeys(login, login_public, hosts)


@pytest.fixture
def start_hosts(tmp_path: Path, pool_keys: PoolKeys) -> Iterator[Callable[[int], list[PoolHost]]]:
    """``start_hosts(n)``: n sshd "hosts" (at most 4), stopped (and their processes killed) at the end."""
    started: list[PoolHost] = []

    def start(n: int) -> list[PoolHost]:
        hosts = []
        for _ in range(n):
            private, public = pool_keys.hosts[len(started)]
            workdir = tmp_path / f"host{len(started)}"
            try:
                sshd = Sshd(workdir / "sshd", private, [pool_keys.login_public]).start()
            except SshdUnavailable as e:
                pytest.skip(f"no sshd for the SSH pool tests: {e}")
            host = PoolHost(sshd, public, workdir / "root")
            started.append(host)
            hosts.append(host)
        return hosts

    yield start
    for host in started:
        host.sshd.stop()
        kill_host_processes(host.root)


@pytest.fixture
def pool_options(pool_keys: PoolKeys) -> Callable[..., dict[str, Any]]:
    """``pool_options(hosts, gpus="A100:80GB:2", **pool options)``: ``providers.ssh`` for ``hosts``
    with fast checks (a host silent after 1 s is lost)."""

    def options(hosts: list[PoolHost], gpus: str = "A100:80GB:2", **extra: Any) -> dict[str, Any]:
        return {
            "hosts": [{"host": f"{h.sshd.user}@127.0.0.1:{h.sshd.port}", "key": str(pool_keys.login),
                       "host_key": h.host_public, "gpus": gpus, "remote_root": str(h.root),
                       "python": sys.executable, "name": f"host{i}"} for i, h in enumerate(hosts)],
            "check_interval_s": 0.2, "silent_after_s": 1.0, "connect_timeout_s": 2.0, "stop_grace_s": 2.0,
            "known_hosts": "/nonexistent/known_hosts", **extra,
        }

    return options
