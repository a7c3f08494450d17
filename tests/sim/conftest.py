"""Fixtures for the sim provider's tests: SimProviders in their own homes, and their cleanup (the data: sim_data.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuorch_sim.provider import SimProvider


@pytest.fixture
def make_sim(tmp_path: Path) -> Iterator[Callable[..., SimProvider]]:
    """``make_sim(**options)`` -> a SimProvider in its own home; everything it launched is
    terminated and its cloud process stopped when the test ends."""
    made: list[SimProvider] = []

    def make(home: str = "home", **options) -> SimProvider:
        p = SimProvider.from_config(options, tmp_path / home)
        made.append(p)
        return p

    yield make
    for p in made:
        for inst in p._list():
            p._terminate(inst.id)
        p.stop_cloud()
