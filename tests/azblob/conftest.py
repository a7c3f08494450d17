"""Fixtures for the az:// store tests: one Azurite per session, a fresh container per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azurite import Azurite, AzuriteUnavailable, Requests

from gpuorch_azure.store import AzureBlobStore


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    try:
        server = Azurite(tmp_path_factory.mktemp("azurite"))
    except AzuriteUnavailable as e:
        pytest.skip(f"no Azurite for the az:// store tests: {e}")
    yield server
    server.stop()


@pytest.fixture
def az_env(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> Azurite:
    """Point ``open_store`` at Azurite (the emulator connection string)."""
    for name, value in azurite.env.items():
        monkeypatch.setenv(name, value)
    return azurite


@pytest.fixture
def container(az_env: Azurite) -> str:
    return az_env.new_container()


@pytest.fixture
def requests() -> Requests:
    return Requests()


@pytest.fixture
def store(container: str, requests: Requests) -> AzureBlobStore:
    return AzureBlobStore(container, client_options=requests.options())
