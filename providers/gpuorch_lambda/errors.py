"""Lambda's error answers as gpuorch's domain errors, at the adapter's boundary.

Every failed request answers ``{"error": {"code": ..., "message": ..., "suggestion": ...}}``
(Lambda Cloud API reference, "Response types and formats" and "Errors":
https://docs-api.lambda.ai/api/cloud). Codes decide, never messages, as the reference asks:
``instance-operations/launch/insufficient-capacity`` -> NoCapacityError, ``global/quota-exceeded``
-> QuotaError, ``global/invalid-api-key`` (401) and ``global/account-inactive`` (403) ->
AuthError, ``global/object-does-not-exist`` (404) -> NotFoundError, 429 and 5xx and
``provider/*`` (an upstream outage) -> TransientError honouring ``Retry-After``; anything else
is a PermanentError naming the code. A connection error or timeout is transient.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
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

CAPACITY = "instance-operations/launch/insufficient-capacity"
QUOTA = "global/quota-exceeded"
INVALID_KEY = "global/invalid-api-key"
INACTIVE = "global/account-inactive"
NOT_FOUND = "global/object-does-not-exist"
INVALID = "global/invalid-parameters"
MAX_RETRY_AFTER_S = 300.0  # a Retry-After beyond this is a server's mistake, not a plan


def error_body(text: str) -> tuple[str, str]:
    """(code, message with its suggestion) of an error answer; ("", start of text) if it is not one."""
    try:
        err = json.loads(text).get("error") or {}
    except (ValueError, AttributeError):
        return "", text[:200].strip()
    if not isinstance(err, Mapping):
        return "", text[:200].strip()
    message = str(err.get("message") or "").strip()
    suggestion = str(err.get("suggestion") or "").strip()
    return str(err.get("code") or ""), f"{message} ({suggestion})" if suggestion else message


def retry_after(headers: Mapping[str, str], default: float = 5.0) -> float:
    """``Retry-After`` in seconds (the delta form Lambda sends), bounded; ``default`` without one."""
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return default
    return min(max(value, 0.0), MAX_RETRY_AFTER_S) if math.isfinite(value) else default


def translate_status(status: int, text: str, headers: Mapping[str, str], what: str) -> ProviderError:
    """The domain error for an HTTP answer ``status`` (>= 400) to ``what`` (``launch gpu_1x_a10``)."""
    code, message = error_body(text)
    line = f"lambda: {what}: {message or f'HTTP {status}'}" + (f" [{code}]" if code else "")
    if code == CAPACITY:
        return NoCapacityError(line, code=code)
    if code == QUOTA:
        return QuotaError(line, code=code)
    if code in (INVALID_KEY, INACTIVE) or status in (401, 403):
        fix = "" if code == INACTIVE else "; set LAMBDA_API_KEY or providers.lambda.api_key_file to a valid key"
        return AuthError(line + fix, code=code or str(status))
    if code == NOT_FOUND or status == 404:
        return NotFoundError(line, code=code or "404")
    if status == 429 or status >= 500 or code.startswith("provider/"):
        return TransientError(line, code=code or str(status), retry_after=retry_after(headers))
    return PermanentError(line, code=code or str(status))


def translate(exc: Exception, what: str) -> ProviderError | None:
    """``gpuorch.provider.retry``'s translate: our errors pass through; httpx's transport errors
    (refused, reset, timed out) are transient; anything else is a bug (None: raised as is)."""
    if isinstance(exc, ProviderError):
        return exc
    import httpx

    if isinstance(exc, httpx.TransportError):
        return TransientError(f"lambda: {what}: {type(exc).__name__}: {exc}", code="Connection")
    if isinstance(exc, ValueError):  # a 2xx answer that is not the documented JSON
        return PermanentError(f"lambda: {what}: the answer did not parse: {exc}", code="Unparseable")
    return None


def as_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected an object, got {type(value).__name__}")
    return value
