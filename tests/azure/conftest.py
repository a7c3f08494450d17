"""Fixtures of the Azure tests: a fake ARM on 127.0.0.1 over TLS and the real SDK client
(azure-mgmt-compute) pointed at it with a static bearer token.

Nothing here reaches a network: the provider gets the fake's endpoint and CA file, a credential
object that hands out the fake's token, ``poll_interval_s=0`` (otherwise each long-running
operation poll waits), and azure-identity's environment is emptied. Its home holds the test
catalog (``azure_test_catalog``: made-up prices, where a Retail Prices refresh writes them), since
gpuorch ships no Azure prices; ``make_provider(priced=False)`` starts without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import azure_test_catalog
import pytest
from azure_helpers import StaticToken, options
from fake_arm import FakeArm

from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options


@pytest.fixture(autouse=True)
def _azure_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_SUBSCRIPTION_ID",
                "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def arm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeArm]:
    arm = FakeArm(tmp_path_factory.mktemp("fake-arm"))
    yield arm
    arm.close()


@pytest.fixture
def arm(arm_server: FakeArm) -> FakeArm:
    """The session's fake ARM, emptied for each test (a TLS server per test would cost little,
    but one is enough)."""
    arm_server.reset()
    return arm_server


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff sleeps the provider asked for (none is really slept)."""
    return []


@pytest.fixture
def make_provider(arm: FakeArm, sleeps: list[float], tmp_path: Path) -> Iterator[Callable[..., AzureProvider]]:
    made: list[AzureProvider] = []

    def make(home: Path | None = None, credential: Any = None, priced: bool = True, **extra: Any) -> AzureProvider:
        opts = parse_options(options(arm, **extra))
        home = home or tmp_path / "home"
        if priced and not (home / "catalog" / "azure.csv").exists():
            azure_test_catalog.write(home)
        p = AzureProvider(opts, home=home, credential=credential or StaticToken(arm.token),
                          sleep=sleeps.append, now=arm.now, monotonic=lambda: arm.clock)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture
def provider(make_provider: Callable[..., AzureProvider]) -> AzureProvider:
    return make_provider()
