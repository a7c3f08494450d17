"""The SSH pool provider passes the provider and runner contract suites against real sshd "hosts"
on 127.0.0.1, with its slot leases in a real SQLite store."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost

from gpuorch.provider import LaunchRequest, Offer, Provider
from gpuorch.runners.port import Runner
from gpuorch.store import Store
from gpuorch.store.slots import StoreSlotLedger
from gpuorch.testing import ProviderContract, RunnerContract
from gpuorch.testing.contract import wait_until
from gpuorch_ssh.provider import SshPoolProvider

pytestmark = pytest.mark.sshpool


def build(options: dict[str, Any], home: Path, store: Store) -> SshPoolProvider:
    provider = SshPoolProvider.from_config(options, home)
    provider.use_slot_ledger(StoreSlotLedger(store, "ssh"))
    return provider


def drain(provider: SshPoolProvider) -> None:
    """Terminate every live lease and wait until each host has stopped its processes and freed its
    slots (the checks run in the background; nothing is left running after a test)."""
    for inst in provider.list_managed():
        if inst.state.alive:
            provider.terminate(inst.id)

    def freed() -> bool:
        provider.watch.refresh(wait_s=5, force=True)
        return all(lease.released_at is not None for lease in provider._ledger().leases())

    wait_until(freed, timeout_s=30, step_s=0.2, what="every lease released")


class TestSshPoolProviderContract(ProviderContract):
    missing_instance_id = "gpuorch-0000000000000000-1-1"

    @pytest.fixture
    def provider(self, tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                 pool_options: Callable[..., dict[str, Any]], store: Store) -> Iterator[Provider]:
        provider = build(pool_options(start_hosts(2)), tmp_path / "home", store)
        yield provider
        drain(provider)
        provider.close()

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        """Another job takes every slot of the offer's host."""
        biggest = max((o for o in provider.offers() if o.zone == offer.zone), key=lambda o: o.gpu_count)
        provider.launch(LaunchRequest(job_id=1, attempt=99, offer=biggest, spot=False, owner=self.other_owner))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestSshPoolRunnerContract(RunnerContract):
    timeout_s = 30.0

    @pytest.fixture
    def pool(self, tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
             pool_options: Callable[..., dict[str, Any]], store: Store) -> Iterator[SshPoolProvider]:
        provider = build(pool_options(start_hosts(1)), tmp_path / "home", store)
        yield provider
        drain(provider)
        provider.close()

    @pytest.fixture
    def runner(self, pool: SshPoolProvider) -> Runner:
        offer = min(pool.offers(), key=lambda o: o.gpu_count)
        return pool.runner(pool.launch(LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False, owner="c0ffee")))

    @pytest.fixture
    def unreachable(self, tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                    pool_options: Callable[..., dict[str, Any]], store: Store) -> Iterator[Runner]:
        """A lease on a host whose sshd went away after the launch."""
        (host,) = start_hosts(1)
        provider = build(pool_options([host]), tmp_path / "gone-home", store)
        offer = min(provider.offers(), key=lambda o: o.gpu_count)
        inst = provider.launch(LaunchRequest(job_id=8, attempt=1, offer=offer, spot=False, owner="c0ffee"))
        host.sshd.stop()
        yield provider.runner(inst)
        provider.terminate(inst.id)  # nothing ran there: its lease ends; the store goes with the test
        provider.close()
