"""Fixtures of the AWS tests: in-process moto, fake credentials, a fixed Deep Learning AMI.

Nothing here reaches a network: moto answers in-process, instance metadata lookups are off,
and the user's ~/.aws files are hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws  # imported before any boto3 session exists: moto hooks new sessions
from moto_helpers import REGIONS, add_dlami, remove_refusals, static_prices
from moto_placement import PlacementGroups

from gpuorch.clock import utcnow
from gpuorch.provider.port import Offer
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    empty = tmp_path_factory.mktemp("aws") / "empty"
    empty.write_text("")
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "AWS_EC2_METADATA_DISABLED": "true", "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


class SharedClients:
    """A boto3 session that hands out one client per region for the whole run.

    Creating a botocore client costs ~0.2 s (a new session ~0.3 s more); moto's state lives in
    its backends, not in clients, so sharing them is safe. Hooks that tests put on a client are
    removed after each test (``remove_refusals``).
    """

    def __init__(self) -> None:
        self.session = boto3.Session(region_name="us-east-1")
        self.clients: dict[str, Any] = {}
        self.placement_groups = PlacementGroups()  # what moto lacks (moto_placement.py)

    def get_credentials(self) -> Any:  # what the doctor asks of a boto3 session
        return self.session.get_credentials()

    def client(self, service: str, region_name: str, **kwargs: Any) -> Any:
        assert service == "ec2", service
        if region_name not in self.clients:
            self.clients[region_name] = self.session.client(service, region_name=region_name, **kwargs)
            self.placement_groups.attach(region_name, self.clients[region_name])
        return self.clients[region_name]


@pytest.fixture(scope="session")
def session() -> SharedClients:
    return SharedClients()


@pytest.fixture(autouse=True)
def _unhook() -> Iterator[None]:
    yield
    remove_refusals()


@pytest.fixture
def placement_groups(session: SharedClients) -> PlacementGroups:
    """EC2 placement groups (moto has none: moto_placement.py), emptied with moto's state."""
    return session.placement_groups


@pytest.fixture
def moto(placement_groups: PlacementGroups) -> Iterator[None]:
    placement_groups.reset()
    with mock_aws():
        for region in REGIONS:
            add_dlami(region)
        yield


@pytest.fixture(scope="session")
def moto_offers(session: SharedClients) -> list[Offer]:
    """Offers of a fresh moto, computed once: moto's listings are static and slow (~0.5 s)."""
    with mock_aws():
        return AwsProvider(parse_options({"regions": REGIONS}), session=session, prices=static_prices).offers()


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff sleeps the provider asked for (none is really slept)."""
    return []


@pytest.fixture
def make_provider(moto: None, session: Any, sleeps: list[float]) -> Callable[..., AwsProvider]:
    def make(home: Path | None = None, now: Callable[[], datetime] = utcnow, **options: Any) -> AwsProvider:
        opts = parse_options({"regions": REGIONS, **options})
        return AwsProvider(opts, home=home, session=session, prices=static_prices, sleep=sleeps.append, now=now)

    return make


@pytest.fixture
def provider(make_provider: Callable[..., AwsProvider]) -> AwsProvider:
    return make_provider()


@pytest.fixture
def ec2(moto: None, session: Any) -> Any:
    """A plain client of us-east-1, for arranging things behind the provider's back."""
    return session.client("ec2", region_name="us-east-1")
