"""EC2 clients per region, and the one way the adapter calls them: retried, then translated.

botocore's own retries are switched off so there is exactly one retry policy, this one:
throttling, 5xx and connection errors are retried with exponential backoff and full jitter,
bounded by attempts and by total time, each retry logged; what still fails becomes
TransientError. Every other error is translated at once (``errors.translate``) and never retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gpuorch.provider.retry import RetryPolicy, call_with_retries

from .errors import translate

log = logging.getLogger("gpuorch.aws")


class Ec2:
    """Per-region EC2 clients of one boto3 session (clients are thread-safe; creating them is not)."""

    def __init__(self, session: Any, *, endpoint_url: str | None = None, policy: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.session = session
        self.endpoint_url = endpoint_url
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self._clients: dict[str, Any] = {}

    def client(self, region: str) -> Any:
        """The boto3 EC2 client of ``region`` (tests register botocore event hooks on it)."""
        if region not in self._clients:
            from botocore.config import Config

            config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10,
                            read_timeout=60, user_agent_extra="gpuorch")
            self._clients[region] = self.session.client("ec2", region_name=region, endpoint_url=self.endpoint_url,
                                                        config=config)
        return self._clients[region]

    def call(self, region: str, method: str, **params: Any) -> dict[str, Any]:
        """``client.<method>(**params)`` with the retry policy; raises gpuorch.errors only."""
        client = self.client(region)
        what = f"ec2 {client.meta.method_to_api_mapping.get(method, method)} in {region}"
        return self._retrying(what, lambda: getattr(client, method)(**params))

    def pages(self, region: str, method: str, key: str, **params: Any) -> list[Any]:
        """Every ``key`` item over all pages; a failure restarts the listing (it has no side effects)."""
        client = self.client(region)
        what = f"ec2 {client.meta.method_to_api_mapping.get(method, method)} in {region}"

        def listing() -> list[Any]:
            return [item for page in client.get_paginator(method).paginate(**params) for item in page.get(key, [])]

        return self._retrying(what, listing)

    def _retrying(self, what: str, fn: Callable[[], Any]) -> Any:
        return call_with_retries(fn, what, translate, self.policy, log=log, sleep=self.sleep)
