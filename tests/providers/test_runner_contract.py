"""The runner contract suite against the local runner (real agent processes, real time) and the
FakeProvider's runner (fake agent, fake clock: no real waiting)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuorch.clock import FakeClock
from gpuorch.provider.port import Instance, LaunchRequest, Offer
from gpuorch.runners.port import Runner
from gpuorch.testing import RunnerContract, wait_until
from gpuorch.testing.fake_job import FakeJobScript
from gpuorch.testing.fake_provider import FakeProvider
from gpuorch_local import LocalProvider, LocalRunner


def _launch(provider: LocalProvider | FakeProvider) -> Instance:
    offer: Offer = min(provider.offers(), key=lambda o: o.price_per_hour)
    return provider.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False))


class TestLocalRunnerContract(RunnerContract):
    timeout_s = 15.0

    @pytest.fixture
    def local(self, tmp_path: Path) -> Iterator[LocalProvider]:
        provider = LocalProvider(tmp_path / "local", boot_s=0.0)
        yield provider
        for inst in provider.list_managed():
            provider.terminate(inst.id)  # kills the agent and its job
        provider.close()

    @pytest.fixture
    def runner(self, local: LocalProvider) -> LocalRunner:
        inst = _launch(local)
        wait_until(lambda: local.get(inst.id).state == "running", what="the local instance to run")
        runner = local.runner(inst)
        assert isinstance(runner, LocalRunner)
        return runner

    @pytest.fixture
    def unreachable(self, local: LocalProvider) -> Runner:
        """An instance whose directory is gone. (One still booting is not unreachable here: its
        status is a file on this host, readable before, during and after its life.)"""
        inst = _launch(local)
        runner = local.runner(inst)
        shutil.rmtree(local.instances_dir / inst.id)
        return runner


class TestFakeRunnerContract(RunnerContract):
    greeting = b"fake job contract-short attempt 1\n"
    poll_s = 1.0  # fake seconds

    @pytest.fixture
    def fake(self) -> FakeProvider:
        provider = FakeProvider(FakeClock(), boot_s=5.0)
        provider.scripts["contract-short"] = FakeJobScript(duration_s=10.0)
        provider.scripts["contract-long"] = FakeJobScript(duration_s=10**6)
        return provider

    @pytest.fixture
    def runner(self, fake: FakeProvider) -> Runner:
        inst = _launch(fake)
        fake.clock.advance(5.0)
        self.clock = fake.clock
        return fake.runner(inst)

    def advance(self, runner: Runner, seconds: float) -> None:
        self.clock.advance(seconds)

    def now(self, runner: Runner) -> float:
        return self.clock.now().timestamp()

    @pytest.fixture
    def unreachable(self, fake: FakeProvider) -> Runner:
        """A fake instance still booting."""
        return fake.runner(_launch(fake))
