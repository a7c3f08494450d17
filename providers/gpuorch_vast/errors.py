"""Vast's answers -> gpuorch's error tree, at the adapter's boundary.

Shapes (docs.vast.ai/api-reference/rate-limits-and-errors): most errors are JSON
``{"success": false, "error": "<code>", "msg": "..."}``; some carry only ``msg`` or ``message``;
a 429 is often plain text ("API requests too frequent") and carries no Retry-After. Renting an
ask someone else took answers ``no_such_ask`` (HTTP 404/410, some paths 400); an empty balance
answers ``insufficient_credit``. The vastai client raises ``requests.HTTPError`` from
``raise_for_status`` and lets transport errors through.
"""

from __future__ import annotations

import json
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

# Error codes and message words of an ask that is no longer rentable (taken, withdrawn, outbid).
_GONE_ASK = ("no_such_ask", "ask_unavailable", "not available", "already rented", "no longer available")
_CREDIT = ("insufficient_credit", "insufficient credit", "not enough credit", "balance")


def body_of(response: Any) -> tuple[str, str]:
    """(error code, message) of an error response, whichever of Vast's shapes it has."""
    text = (getattr(response, "text", "") or "")[:2000]
    try:
        doc = json.loads(text)
    except ValueError:
        return "", text.strip()
    if not isinstance(doc, dict):
        return "", text.strip()
    code = str(doc.get("error") or "")
    msg = str(doc.get("msg") or doc.get("message") or code)
    return code, msg


def _retry_after(response: Any) -> float:
    try:
        return min(max(float(response.headers.get("Retry-After", "")), 0.0), 300.0)
    except (TypeError, ValueError):
        return 5.0  # Vast sends none (docs): the caller's backoff decides


def translate(e: Exception, what: str) -> ProviderError | None:
    """The gpuorch error for ``e``; None for an exception that is a bug, not Vast's answer."""
    import requests

    if isinstance(e, ProviderError):
        return e
    if isinstance(e, requests.HTTPError) and e.response is not None:
        return from_status(e.response.status_code, *body_of(e.response), what=what,
                           retry_after=_retry_after(e.response))
    if isinstance(e, requests.ConnectionError | requests.Timeout):
        return TransientError(f"vast {what}: {type(e).__name__}: {e}", code="Connection")
    if isinstance(e, requests.RequestException):
        return PermanentError(f"vast {what}: {e}", code="Request")
    if isinstance(e, ValueError | KeyError | TypeError):  # a body that is not the documented shape
        return PermanentError(f"vast {what}: unexpected answer ({type(e).__name__}: {e})", code="BadAnswer")
    return None


def from_status(status: int, code: str, msg: str, *, what: str, retry_after: float = 5.0) -> ProviderError:
    said = f"vast {what}: HTTP {status} {code or ''} {msg}".rstrip()
    low = f"{code} {msg}".lower()
    if status == 429 or status >= 500:
        return TransientError(said, code=code or f"HTTP{status}", retry_after=retry_after)
    if any(w in low for w in _CREDIT):
        return QuotaError(said + "; add credit at https://cloud.vast.ai/billing/", code=code or "insufficient_credit")
    if any(w in low for w in _GONE_ASK):
        return NoCapacityError(said, code=code or "no_such_ask")
    if status == 401:
        return AuthError(said + "; check VAST_API_KEY or ~/.config/vastai/vast_api_key", code=code or "Unauthorized")
    if status == 403:
        return AuthError(said + "; the API key lacks a permission gpuorch needs (docs/vast.md)",
                         code=code or "Forbidden")
    if status in (404, 410):
        return NotFoundError(said, code=code or "NotFound")
    return PermanentError(said, code=code or f"HTTP{status}")
