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
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_random_exponential

from gpuorch.errors import TransientError

from .errors import translate

log = logging.getLogger("gpuorch.aws")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    max_total_s: float = 60.0
    base_s: float = 0.5  # first backoff is up to this; doubles per attempt (full jitter)
    max_wait_s: float = 20.0


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
        p = self.policy

        def attempt() -> Any:
            try:
                return fn()
            except Exception as e:
                err = translate(e, what)
                if err is None:
                    raise
                raise err from None

        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            log.warning("%s (attempt %d of %d); retrying in %.1fs", exc, state.attempt_number, p.max_attempts, wait)

        retrying = Retrying(
            stop=stop_after_attempt(p.max_attempts) | stop_after_delay(p.max_total_s),
            wait=wait_random_exponential(multiplier=p.base_s, max=p.max_wait_s),
            retry=retry_if_exception_type(TransientError), before_sleep=log_retry, sleep=self.sleep, reraise=True,
        )
        try:
            return retrying(attempt)
        except TransientError as e:
            n = retrying.statistics.get("attempt_number", 1)
            raise TransientError(f"{e} (gave up after {n} attempt{'s' if n > 1 else ''})", code=e.code) from None
