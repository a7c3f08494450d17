"""The one retry policy of every cloud adapter: a call that fails with ``TransientError``
(throttling, 5xx, connection errors, as the adapter's ``translate`` decides) is retried with
exponential backoff and full jitter, bounded by attempts and total time, each retry logged;
what still fails is a TransientError saying how many attempts were made. Every other error is
translated once and raised at once. The SDKs' own retries are switched off by the adapters so
that this is the only policy."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_random_exponential

from gpuorch.errors import ProviderError, TransientError

T = TypeVar("T")
Translate = Callable[[Exception, str], ProviderError | None]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    max_total_s: float = 60.0
    base_s: float = 0.5  # first backoff is up to this; doubles per attempt (full jitter)
    max_wait_s: float = 20.0


def call_with_retries(fn: Callable[[], T], what: str, translate: Translate, policy: RetryPolicy, *,
                      log: logging.Logger, sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()`` under ``policy``; an exception ``translate(e, what)`` maps to None is raised as it is
    (a bug, not the cloud's answer), any other becomes the gpuorch error it maps to."""
    def attempt() -> T:
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
        log.warning("%s (attempt %d of %d); retrying in %.1fs", exc, state.attempt_number, policy.max_attempts, wait)

    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts) | stop_after_delay(policy.max_total_s),
        wait=wait_random_exponential(multiplier=policy.base_s, max=policy.max_wait_s),
        retry=retry_if_exception_type(TransientError), before_sleep=log_retry, sleep=sleep, reraise=True,
    )
    try:
        return retrying(attempt)
    except TransientError as e:
        n = retrying.statistics.get("attempt_number", 1)
        raise TransientError(f"{e} (gave up after {n} attempt{'s' if n > 1 else ''})", code=e.code,
                             retry_after=e.retry_after) from None
