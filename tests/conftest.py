from __future__ import annotations

import logging
import os
import sys

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


def pytest_runtest_teardown(item: pytest.Item) -> None:
    # Training runs in child processes (tests/workloads/torch_runs.py): torch's threads in a worker
    # that then ran hundreds of other files segfaulted it, and a crashed worker can hang xdist's
    # loadfile scheduling until CI's limit. Name the test that brought torch in.
    if "torch" in sys.modules:
        pytest.fail(f"{item.nodeid} imported torch into the pytest process: run it in a child (torch_runs.python)")


@pytest.fixture(autouse=True)
def _logging_restored():
    """Every logger's handlers, level and propagation as they were before the test. A test that sets
    up logging (the daemon's log format, ``basicConfig`` under typer's CliRunner) would otherwise
    leave a handler on a stream that closes with it, and a later test's CLI output on the same
    worker would carry "--- Logging error ---" (seen on a fresh clone under load)."""
    def loggers() -> list[logging.Logger]:
        found = [x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)]
        return [logging.getLogger(), *found]

    saved = {lg: (list(lg.handlers), lg.level, lg.propagate) for lg in loggers()}
    yield
    for lg in loggers():
        handlers, level, propagate = saved.get(lg, ([], lg.level, lg.propagate))
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


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
