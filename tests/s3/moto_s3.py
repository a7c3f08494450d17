"""A local S3 for tests: moto's ThreadedMotoServer on 127.0.0.1 (an ephemeral port).

Shared by tests/s3 and tests/ssh (whose agents reach it from another process through
``GPUORCH_S3_ENDPOINT_URL``). The server is held in memory; each test makes its own bucket.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

from gpuorch_aws.store import S3Store

# Fake credentials for moto only; real ones from the developer's environment must never be used.
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
_buckets = itertools.count(1)


class MotoS3:
    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use this S3: the endpoint and the fake credentials."""
        return dict(FAKE_AWS_ENV, GPUORCH_S3_ENDPOINT_URL=self.endpoint_url)

    @functools.cached_property
    def client(self):  # type: ignore[no-untyped-def]
        """A plain boto3 client for setting up and inspecting the server."""
        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
            config=Config(s3={"addressing_style": "path"}),
        )

    def new_bucket(self) -> str:
        name = f"gpuorch-test-{next(_buckets)}"
        self.client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.server.stop()


class Requests:
    """The S3 operations a store's client sends, as (operation, key) pairs (botocore events)."""

    def __init__(self, store: S3Store) -> None:
        self.calls: list[tuple[str, str]] = []
        store.client.meta.events.register("before-parameter-build.s3", self._record)

    def _record(self, model, params, **_kwargs) -> None:  # type: ignore[no-untyped-def]
        self.calls.append((model.name, params.get("Key", "")))

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.calls if op == operation)

    def keys(self, *operations: str) -> list[str]:
        return [key for op, key in self.calls if op in operations]

    def clear(self) -> None:
        self.calls.clear()
