"""RunPod's answers -> ``gpuorch.errors``, pure.

The GraphQL API answers most failures with HTTP 200 and ``{"errors": [{"message": ...}]}``
(https://docs.runpod.io/sdks/graphql/manage-pods; the official client raises its ``QueryError``
with the first message, runpod/api/graphql.py), and refuses a bad key with 401 (the client's
``AuthenticationError``). Capacity, balance and not-found failures are told apart by their
message, the only thing the API gives: the stock-out message is the one RunPod's console and API
print ("There are no longer any instances available with the requested specifications").
"""

from __future__ import annotations

import re

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    ProviderError,
    QuotaError,
    TransientError,
)

_NO_CAPACITY = re.compile(r"no longer any instances available|not enough (free )?gpus|out of stock|"
                          r"no (gpu|instances?|machines?) (is |are )?available|bid.*(too low|below)", re.I)
_QUOTA = re.compile(r"balance|insufficient funds|spend limit|maximum number of pods|quota|limit reached", re.I)
_NOT_FOUND = re.compile(r"not found|does not exist|no pod with", re.I)
_AUTH = re.compile(r"unauthori[sz]ed|api key|forbidden|permission", re.I)


def from_http(status: int, body: str, what: str, retry_after: float | None) -> ProviderError:
    """A non-2xx HTTP answer."""
    text = f"runpod {what}: HTTP {status}: {body.strip()[:300]}"
    if status == 429:
        return TransientError(text, code="RateLimited", retry_after=retry_after if retry_after is not None else 5.0)
    if status >= 500:
        return TransientError(text, code=f"HTTP{status}", retry_after=retry_after if retry_after is not None else 5.0)
    if status in (401, 403):
        return AuthError(f"runpod {what}: the API key was refused (HTTP {status}); set RUNPOD_API_KEY to a key "
                         "with read/write access (console: Settings > API Keys)", code=f"HTTP{status}")
    if status == 404:
        return NotFoundError(text, code="NotFound")
    return PermanentError(text, code=f"HTTP{status}")


def from_graphql(message: str, what: str) -> ProviderError:
    """The first GraphQL error of an HTTP 200 answer."""
    text = f"runpod {what}: {message.strip()[:300]}"
    if _NO_CAPACITY.search(message):
        return NoCapacityError(text, code="NoCapacity")
    if _AUTH.search(message):
        return AuthError(text, code="Unauthorized")
    if _QUOTA.search(message):
        return QuotaError(text, code="Quota")
    if _NOT_FOUND.search(message):
        return NotFoundError(text, code="NotFound")
    if re.search(r"rate limit|too many requests|try again later|temporar", message, re.I):
        return TransientError(text, code="RateLimited")
    return PermanentError(text, code="GraphQLError")


def retry_after_s(header: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date or garbage: None), bounded to an hour."""
    if header is None:
        return None
    try:
        value = float(header.strip())
    except ValueError:
        return None
    if value != value or value < 0:
        return None
    return min(value, 3600.0)
