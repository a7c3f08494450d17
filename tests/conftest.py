from __future__ import annotations

import pytest

from gpuorch.clock import FakeClock
from gpuorch.store import Store


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """No test touches the user's real state directory or cloud credentials."""
    home = tmp_path_factory.mktemp("gpuorch-home")
    monkeypatch.setenv("GPUORCH_HOME", str(home))
    monkeypatch.delenv("GPUORCH_DATABASE_URL", raising=False)
    return home


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
