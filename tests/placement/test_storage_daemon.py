"""Storage in the total cost, through the assembled daemon (issue 33 item 6): RunPod (secure pods at
$0.69/h, network volumes at $0.07/GiB-month) and Vast (RTX 4090 asks from $0.38/h, volumes at
$0.15/GiB-month) on their fake APIs. A job without a volume lands on Vast's cheaper GPU; the same
job with a 3500 GiB volume lands on RunPod, whose total (GPU + the volume's storage for the run)
is lower. The daemon's rates come from the providers' catalogs (``Settings.storage_rates``).

The fakes' instances run nothing: a scripted agent plays each one (``tests.kit.agents``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon
from tests.kit.agents import Agent
from tests.runpod.fake_runpod import KEY as RUNPOD_KEY
from tests.runpod.fake_runpod import FakeRunpod
from tests.vast.fake_vast import KEY as VAST_KEY
from tests.vast.fake_vast import FakeVastServer, market

pytestmark = [pytest.mark.runpod, pytest.mark.vast, pytest.mark.timeout(300)]


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AssembledDaemon]:
    monkeypatch.setenv("RUNPOD_API_KEY", RUNPOD_KEY)
    monkeypatch.setenv("VAST_API_KEY", VAST_KEY)
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # no real ~/.runpod or vastai key file
    monkeypatch.delenv("RUNPOD_API_BASE_URL", raising=False)
    runpod, vast = FakeRunpod().start(), FakeVastServer()
    vast.fake.add(*market())
    config = {"providers": {"runpod": {"api_url": runpod.url, "clouds": ["secure"], "volume_data_center": "EU-RO-1"},
                            "vast": {"server_url": vast.fake.url}}}
    try:
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            agents: dict[str, Agent] = {}
            for name in ("runpod", "vast"):
                monkeypatch.setattr(d.adapter(name), "runner", lambda inst: agents.setdefault(inst.id, Agent()))
            d.agents = agents  # type: ignore[attr-defined]
            yield d
    finally:
        runpod.stop()
        vast.close()


def run(d: AssembledDaemon, name: str, **extra: Any) -> tuple[str, str | None]:
    """Submit the job, let it start, finish it: the provider it ran on, and its volume's."""
    job = d.submit({"name": name, "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                    "spot_policy": "on-demand", "providers": ["runpod", "vast"], **extra})
    agents: dict[str, Agent] = d.agents  # type: ignore[attr-defined]
    agent = d.until(lambda: next((a for a in agents.values() if a.started and not a.done), None), timeout_s=60,
                    what=f"{name}'s agent to start")
    [attempt] = d.attempts(job)
    agent.done = True
    assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
    return attempt.provider, d.job(job).volume_provider


def test_the_job_lands_on_the_cheaper_total_gpu_and_storage(daemon: AssembledDaemon) -> None:
    assert run(daemon, "bare") == ("vast", None)  # no volume: the cheaper GPU
    assert run(daemon, "with-volume", volume={"size": "3500GB", "mount": "/workspace/data"}) == ("runpod", "runpod")
