from __future__ import annotations

import os

import pytest

from gpuorch.clock import FakeClock
from gpuorch.store import Store

# Variables that steer the tests themselves, not gpuorch: kept so a run can be replayed.
KEPT = {"GPUORCH_CHAOS_SEED"}
# Markers of the files that run for minutes (real training, the chaos night): collected first, so
# that `make test`'s workers (pytest-xdist, --dist loadfile) start them first and none is left
# running one alone at the end.
LONG = ("workloads", "chaos")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in LONG))  # stable: files stay whole


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """No test touches the user's real state directory or cloud credentials."""
    home = tmp_path_factory.mktemp("gpuorch-home")
    systemd = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "JOURNAL_STREAM"]
    for var in [v for v in os.environ if v.startswith("GPUORCH_") and v not in KEPT] + systemd:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUORCH_HOME", str(home))
    # No config file of this machine or user applies: /etc/gpuorch and ~/.config/gpuorch are elsewhere.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    monkeypatch.setenv("CONFIGURATION_DIRECTORY", str(tmp_path_factory.mktemp("etc-gpuorch")))
    return home


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'state.db'}")
    yield s
    s.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
