"""Fixtures of the Vast adapter's tests: the fake Vast API (``fake_vast.py``) on 127.0.0.1, the
key in ``VAST_API_KEY`` (vastai's documented variable), and a provider built on them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_vast import KEY, FakeVast, FakeVastServer, market

from gpuorch_vast.config import parse_options
from gpuorch_vast.provider import VastProvider


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
