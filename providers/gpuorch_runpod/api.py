"""RunPod's GraphQL API over HTTP: the one place the adapter talks to RunPod.

The endpoint is built as the official client builds it (``runpod`` 1.12, runpod/api/graphql.py):
``$RUNPOD_API_BASE_URL`` (default ``https://api.runpod.io``) + ``/graphql``, a JSON body
``{"query": ...}`` POSTed with ``Authorization: Bearer <key>``. The adapter posts itself, with
``requests`` (the client's own HTTP library), rather than through ``runpod.api``:

- its ``run_graphql_query`` drops the HTTP status and ``Retry-After`` of a 429 or 5xx (it parses
  every body as JSON), so throttling could not be told from a refused request;
- its mutation builders put values into the document unescaped (``f'name: "{name}"'``): a quote
  in an image name or a newline in an env value rewrites or breaks the mutation. Here every value
  travels as a GraphQL variable, JSON-encoded;
- it has no interruptible (spot) launch (``podRentInterruptable``), and reads the base URL from
  the process environment only (one daemon may name its endpoint in its config).

Retries: a ``TransientError`` (429, 5xx, a dropped connection) is tried again up to
``max_attempts``, waiting the answer's ``Retry-After`` where it gives one (else exponential
backoff), within ``retry_max_s``; past that, the error goes up with its ``retry_after`` so the
daemon backs off as RunPod asked.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from gpuorch.errors import TransientError

from .errors import from_graphql, from_http, retry_after_s

log = logging.getLogger("gpuorch.runpod")
DEFAULT_BASE_URL = "https://api.runpod.io"
TIMEOUT_S = 30.0  # per HTTP request; the official client's


class RunpodApi:
    def __init__(self, api_key: str, base_url: str = DEFAULT_BASE_URL, *, max_attempts: int = 5,
                 retry_max_s: float = 60.0, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        import requests

        self._key = api_key  # kept in memory only: never logged, stored or put into a message
        self.url = base_url.rstrip("/") + "/graphql"
        self.max_attempts, self.retry_max_s = max_attempts, retry_max_s
        self._sleep, self._monotonic = sleep, monotonic
        self._session = requests.Session()
        self._session.trust_env = False  # no proxy or .netrc from the environment carries our key elsewhere

    def __repr__(self) -> str:
        return f"RunpodApi({self.url!r})"  # never the key

    def query(self, document: str, variables: dict[str, Any] | None = None, *, what: str) -> dict[str, Any]:
        """``data`` of the answer; raises the translated ``gpuorch.errors`` (module docstring)."""
        start = self._monotonic()
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._post(document, variables or {}, what)
            except _Throttled as t:
                e, asked = t.error, t.asked
            backoff = min(20.0, 0.5 * 2 ** (attempt - 1)) * random.random()
            wait = asked if asked is not None else backoff  # RunPod's own word first
            if attempt == self.max_attempts or self._monotonic() - start + wait > self.retry_max_s:
                raise TransientError(f"{e} (gave up after {attempt} attempt{'s' if attempt > 1 else ''})",
                                     code=e.code, retry_after=e.retry_after) from None
            log.warning("%s (attempt %d of %d); retrying in %.1fs", e, attempt, self.max_attempts, wait)
            self._sleep(wait)
        raise AssertionError("unreachable")

    def _post(self, document: str, variables: dict[str, Any], what: str) -> dict[str, Any]:
        import requests

        try:
            r = self._session.post(self.url, json={"query": document, "variables": variables}, timeout=TIMEOUT_S,
                                   headers={"Authorization": f"Bearer {self._key}", "User-Agent": "gpuorch"})
        except requests.RequestException as e:  # refused, reset, timed out: the network, not RunPod's answer
            raise _Throttled(TransientError(f"runpod {what}: {type(e).__name__}: {_scrub(str(e), self._key)}",
                                            code="Connection"), None) from None
        if r.status_code >= 300:
            asked = retry_after_s(r.headers.get("Retry-After"))
            err = from_http(r.status_code, _scrub(r.text, self._key), what, asked)
            raise _Throttled(err, asked) if isinstance(err, TransientError) else err
        try:
            body = r.json()
        except ValueError:  # a proxy's HTML page
            raise _Throttled(TransientError(f"runpod {what}: an answer that is not JSON ({r.text[:120]!r})",
                                            code="Unparseable"), None) from None
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            err = from_graphql(_scrub(str(first.get("message", errors)), self._key), what)
            raise _Throttled(err, None) if isinstance(err, TransientError) else err
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise _Throttled(TransientError(f"runpod {what}: an answer without data", code="Unparseable"), None)
        return data

    def close(self) -> None:
        self._session.close()


class _Throttled(Exception):
    """A TransientError to try again, with the wait RunPod asked for (None: it asked none)."""

    def __init__(self, error: TransientError, asked: float | None) -> None:
        super().__init__(str(error))
        self.error, self.asked = error, asked


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


