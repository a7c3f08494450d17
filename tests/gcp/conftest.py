"""Fixtures of the GCP tests: a fake GCE on 127.0.0.1 and the real SDK client pointed at it.

Nothing here reaches a network: the provider gets the fake's endpoint (anonymous credentials),
and google-auth's environment is emptied so nothing can find real credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_gce import FakeGce

from gpuorch_gcp import GcpProvider
from gpuorch_gcp.config import parse_options

ZONES = ["us-central1-a", "us-central1-b", "europe-west4-a"]


@pytest.fixture(autouse=True)
def _gcp_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    empty = tmp_path_factory.mktemp("gcloud")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(empty))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # never ask a real metadata server
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    for key in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeGce]:
    fake = FakeGce()
    yield fake
    fake.close()


@pytest.fixture
def fake(fake_server: FakeGce) -> FakeGce:
    """The session's fake GCE, emptied for each test (starting a server per test costs little,
    but SDK clients are the slow part; they are per provider)."""
    with fake_server.lock:
        fake_server.instances.clear()
        fake_server.disks.clear()
        fake_server.machine_types.clear()
        fake_server.accelerator_types.clear()
        fake_server.accelerator_page_size = 2
        fake_server.slow_attach = False
        fake_server._pending_attaches.clear()
        fake_server.operations.clear()
        fake_server.refusals.clear()
        fake_server.http_failures.clear()
        fake_server.requests.clear()
        fake_server._by_request_id.clear()
        fake_server._reclaims.clear()
        fake_server.guest_attributes.clear()
        fake_server.policies.clear()
        fake_server.offset_s = 0.0
        fake_server.boot_s = 0.0
    return fake_server


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff sleeps the provider asked for (none is really slept)."""
    return []


@pytest.fixture
def make_provider(fake: FakeGce, sleeps: list[float]) -> Iterator[Callable[..., GcpProvider]]:
    made: list[GcpProvider] = []

    def make(home: Path | None = None, runner_options: Any = None, **options: Any) -> GcpProvider:
        opts = parse_options({"project": fake.project, "zones": ZONES, "endpoint": fake.url, **options})
        p = GcpProvider(opts, home=home, sleep=sleeps.append, now=fake.now, runner_options=runner_options)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture
def provider(make_provider: Callable[..., GcpProvider]) -> GcpProvider:
    return make_provider()
