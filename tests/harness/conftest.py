"""Fixtures of the assembled-daemon tests that need a cloud's local stand-in.

``moto_ec2``: moto's server (``ThreadedMotoServer``) on 127.0.0.1, so a daemon config can name it
as ``providers.aws.endpoint_url`` and the adapter is built from the config file as ``gpuorch
daemon`` builds it. Credentials reach boto3 through its standard chain (environment variables,
fake ones; the user's ~/.aws files are hidden), never through the config. moto is imported
only by the tests that ask for it.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class MotoEc2:
    url: str  # the endpoint a daemon config names (providers.aws.endpoint_url)

    def reset(self) -> None:
        """Forget every resource (moto's own reset endpoint)."""
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=30).close()


@pytest.fixture(scope="session")
def _moto_server() -> Iterator[Any]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fake credentials in boto3's standard chain; nothing of the user's (profiles, IMDS) applies."""
    empty = tmp_path_factory.mktemp("aws") / "empty"
    empty.write_text("")
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "AWS_EC2_METADATA_DISABLED": "true",
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",  # read by moto when a region's backend is made (after reset)
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def moto_ec2(_moto_server: Any, aws_credentials: None) -> Iterator[MotoEc2]:
    """A fresh moto EC2 on 127.0.0.1 (one server per session, emptied before and after each test).
    Its state lives in this process, so ``tests/aws/moto_helpers`` (AMIs, spot interruptions) act on it."""
    host, port = _moto_server.get_host_and_port()
    moto = MotoEc2(f"http://{host}:{port}")
    moto.reset()
    yield moto
    moto.reset()
