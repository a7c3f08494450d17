"""Fixtures for the sim provider's tests: real trace files, synthetic ones, and cleanup."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuorch_sim.provider import SimProvider

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = DATA / "spot-traces" / "aws-p3-2023"
PRICES = DATA / "spot-prices" / "aws-p3-2023"


def write_trace(path: Path, data: list[int], gap_s: float = 60.0) -> Path:
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap_s}, "data": data}))
    return path


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
