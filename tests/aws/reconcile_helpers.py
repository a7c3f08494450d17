"""The real reconciler with the AWS adapter (moto), a SQLite store and a scripted agent: moto's
instances run nothing, so the agent runs from ``start`` until a test says it is done.

Bare Reconciler: the AWS adapter is built on moto with a scripted agent (moto's instances run
nothing), which no config file can name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from moto_helpers import REGIONS, static_prices

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.store import Store
from gpuorch.store.models import Job
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options
from tests.kit.agents import Agent


class Installation:
    """One gpuorch installation: its own database (and installation id), provider and reconciler.
    The provider reads scheduled events against the reconciler's fake clock."""

    def __init__(self, path: Path, session: Any, clock: FakeClock, **options: Any) -> None:
        self.store = Store(f"sqlite:///{path}")
        self.agents: dict[str, Agent] = {}
        agents = self.agents

        class Aws(AwsProvider):
            def runner(self, instance: Instance) -> Runner:
                return agents.setdefault(instance.id, Agent())

        self.provider = Aws(parse_options({"regions": REGIONS, **options}), session=session, prices=static_prices,
                            now=clock.now)
        self.rec = Reconciler(self.store, {"aws": self.provider}, clock=clock)

    def submit(self, clock: FakeClock, **fields: Any) -> int:
        spec = parse_spec({"name": "train", "run": "true", "spot_policy": "on-demand",
                           "volume": {"size": "10GB", "mount": "/data"}, **fields})
        job = jobs.submit(self.store, spec, clock.now())
        assert job.id is not None
        return job.id

    def job(self, job_id: int) -> Job:
        with self.store.read() as s:
            job = s.get(Job, job_id)
        assert job is not None
        return job


def passes(clock: FakeClock, *installations: Installation, n: int = 4, step_s: float = 70) -> None:
    """``n`` rounds of one pass per installation, ``step_s`` apart (70: past the volume sweep's minute)."""
    for _ in range(n):
        for inst in installations:
            inst.rec.run_pass()
        clock.advance(step_s)
