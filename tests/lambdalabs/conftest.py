"""Fixtures of the Lambda tests: a fake Lambda Cloud API on 127.0.0.1 (fake_lambda.py) and the
real provider with its httpx client pointed at it. ``$LAMBDA_API_KEY`` is the fake's key; no
test can reach Lambda (the endpoint is always the fake's)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_lambda import KEY, FakeLambda

from gpuorch_lambda import LambdaProvider
from gpuorch_lambda.config import parse_options


@pytest.fixture(autouse=True)
def _lambda_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))  # no real ~/.lambda_cloud is read


@pytest.fixture
def fake() -> Iterator[FakeLambda]:
    f = FakeLambda().start()
    yield f
    f.stop()


@pytest.fixture
def make_provider(fake: FakeLambda, tmp_path: Path) -> Iterator[Callable[..., LambdaProvider]]:
    made: list[LambdaProvider] = []

    def make(home: Path | None = tmp_path, **options: Any) -> LambdaProvider:
        opts = parse_options({"endpoint": fake.url, "max_attempts": 3, "retry_max_s": 5, **options})
        p = LambdaProvider(opts, api_key=KEY, home=home, sleep=lambda s: None, wall=lambda: fake.clock + 1e9)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()
