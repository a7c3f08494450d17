"""Fixtures of the RunPod tests: the fake API (fake_runpod.py) and a provider pointed at it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_runpod import KEY, FakeRunpod

from gpuorch_runpod.config import parse_options
from gpuorch_runpod.provider import RunpodProvider

pytestmark = pytest.mark.runpod


@pytest.fixture(autouse=True)
def _runpod_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The key from the environment, as users give it; no real ~/.runpod is read."""
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    monkeypatch.delenv("RUNPOD_API_BASE_URL", raising=False)


@pytest.fixture
def fake() -> Iterator[FakeRunpod]:
    server = FakeRunpod().start()
    yield server
    server.stop()


@pytest.fixture
def rp(fake: FakeRunpod, tmp_path: Path) -> Iterator[RunpodProvider]:
    p = RunpodProvider(parse_options({"api_url": fake.url, "retry_max_s": 5}), KEY, home=tmp_path / "home",
                       sleep=lambda s: None)
    yield p
    p.close()
