"""Fixtures of the Vast adapter's tests: the fake Vast API (``fake_vast.py``) on 127.0.0.1, the
key in ``VAST_API_KEY`` (vastai's documented variable), and a provider built on them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_vast import KEY, FakeVast, FakeVastServer, ask

from gpuorch_vast.config import parse_options
from gpuorch_vast.provider import VastProvider


def market() -> list[dict]:
    """A small marketplace: RTX 4090s in two countries at different prices and reliabilities, an
    A100 80GB, an unreliable cheap host, and an A100 40GB (memory tells the variant)."""
    return [
        ask(101, "RTX 4090", dph=0.40, min_bid=0.20, reliability=0.99, geolocation="Texas, US"),
        ask(102, "RTX 4090", dph=0.38, min_bid=0.18, reliability=0.90, geolocation="Oregon, US"),  # below 0.95
        ask(103, "RTX 4090", dph=0.39, min_bid=0.19, reliability=0.96, geolocation="Quebec, CA"),
        ask(104, "RTX 4090", dph=0.41, min_bid=0.22, reliability=0.999, geolocation="Texas, US"),
        ask(201, "A100 SXM4", gpu_ram=81920, dph=1.20, min_bid=0.70, reliability=0.98, geolocation="Sweden, SE"),
        ask(202, "A100 SXM4", gpu_ram=40960, dph=0.80, min_bid=0.40, reliability=0.97, geolocation="Sweden, SE"),
        ask(301, "RTX 4090", num_gpus=2, dph=0.82, min_bid=0.40, reliability=0.99, geolocation="Texas, US"),
    ]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVast]:
    server = FakeVastServer()
    server.fake.add(*market())
    monkeypatch.setenv("VAST_API_KEY", KEY)
    yield server.fake
    server.close()


@pytest.fixture
def vast(fake: FakeVast, tmp_path: Path) -> Iterator[VastProvider]:
    p = VastProvider(parse_options({"server_url": fake.url, "max_attempts": 3, "retry_max_s": 5}), KEY,
                     home=tmp_path / "home", sleep=lambda s: None)
    yield p
    p.close()
