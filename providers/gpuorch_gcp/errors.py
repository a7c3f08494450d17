"""google-api-core exceptions and failed operations -> gpuorch's domain errors. Pure: no SDK
import, no I/O (exceptions are recognised by their class names and attributes).

Where GCE says what (docs/gcp.md, "Errors"):

- capacity, mostly inside a failed insert *operation* (``error.errors[].code``):
  ZONE_RESOURCE_POOL_EXHAUSTED, ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, STOCKOUT (and the
  rarer RESOURCE_POOL_EXHAUSTED, REGION_RESOURCE_POOL_EXHAUSTED) -> NoCapacityError;
- quota: QUOTA_EXCEEDED in an operation, or an HTTP 403 whose reason is ``quotaExceeded`` ->
  QuotaError (a 403 is not always about credentials);
- throttling: 429, or 403 ``rateLimitExceeded``/``userRateLimitExceeded``; any 5xx;
  connection errors and timeouts -> TransientError (retried inside the adapter first);
- 401, other 403s, and google-auth failures (no default credentials, refresh refused) ->
  AuthError, never retried;
- 404 -> NotFoundError; everything else -> PermanentError.

A failed *operation* that would be transient (5xx, throttled) is a NoCapacityError instead:
the insert's ``requestId`` makes a repeat of the attempt replay the same failed operation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    ProviderError,
    QuotaError,
    TransientError,
)

CAPACITY = frozenset({
    "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "STOCKOUT",
    "RESOURCE_POOL_EXHAUSTED", "REGION_RESOURCE_POOL_EXHAUSTED",
})  # fmt: skip
QUOTA = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
THROTTLING = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
_AUTH_EXC = frozenset({"DefaultCredentialsError", "RefreshError"})
_TRANSIENT_EXC = frozenset({"ConnectionError", "Timeout", "ConnectTimeout", "ReadTimeout", "ChunkedEncodingError",
                            "RetryError", "DeadlineExceeded", "ServiceUnavailable", "TransportError"})
AUTH_HINT = ("; check the credentials google-auth finds (GOOGLE_APPLICATION_CREDENTIALS, "
             "`gcloud auth application-default login`, the VM's service account) and their IAM roles (docs/gcp.md)")


def classify(codes: Iterable[str], status: int | None) -> type[ProviderError]:
    """The domain error class for GCE error codes/reasons ``codes`` with HTTP ``status``."""
    codes = set(codes)
    if codes & CAPACITY:
        return NoCapacityError
    if codes & QUOTA:
        return QuotaError
    if codes & THROTTLING or status == 429 or (status is not None and status >= 500):
        return TransientError
    if status in (401, 403):
        return AuthError
    if status == 404:
        return NotFoundError
    return PermanentError


def operation_error(op: Mapping[str, Any], what: str) -> ProviderError | None:
    """The error of a finished operation (its ``to_dict`` form), or None if it succeeded."""
    errors = ((op.get("error") or {}).get("errors")) or []
    if not errors:
        return None
    codes = [str(e.get("code") or "") for e in errors]
    status = op.get("http_error_status_code") or None
    cls = classify(codes, int(status) if status else None)
    if cls is TransientError:
        # A finished operation replays as is for a repeat with the same requestId: retrying
        # this attempt cannot help. Like no capacity, the next attempt (a new token) is the retry.
        cls = NoCapacityError
    message = "; ".join(f"{e.get('code')}: {e.get('message') or 'no message'}" for e in errors)
    if cls is AuthError:
        message += AUTH_HINT
    return cls(f"{what}: {message}", code=codes[0] or None)


def translate(exc: BaseException, what: str) -> ProviderError | None:
    """The domain error for an exception raised by the SDK while doing ``what``; None for one
    that is not the SDK's or its transport's (a bug: let it propagate)."""
    if isinstance(exc, ProviderError):
        return exc
    top = type(exc).__module__.split(".")[0]
    if top not in ("google", "requests", "urllib3"):
        return None
    names = {t.__name__ for t in type(exc).__mro__}
    status = getattr(exc, "code", None)
    if "GoogleAPICallError" in names and isinstance(status, int):
        reasons = [str(e.get("reason") or "") for e in (getattr(exc, "errors", None) or []) if isinstance(e, dict)]
        reason = getattr(exc, "reason", None)
        codes = [*reasons, *([reason] if reason else [])]
        cls = classify(codes, status)
        message = f"{what}: HTTP {status}: {getattr(exc, 'message', None) or exc}"
        if cls is AuthError:
            message += AUTH_HINT
        return cls(message, code=(codes[0] if codes else None) or str(status))
    if names & _AUTH_EXC and top == "google":
        return AuthError(f"{what}: {exc}{AUTH_HINT}", code=type(exc).__name__)
    if names & _TRANSIENT_EXC:
        return TransientError(f"{what}: {type(exc).__name__}: {exc}", code=type(exc).__name__)
    return PermanentError(f"{what}: {type(exc).__name__}: {exc}", code=type(exc).__name__)
