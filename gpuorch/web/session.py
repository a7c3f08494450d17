"""The dashboard's login: the API token typed once into a form, then an HttpOnly cookie.

A browser cannot send ``Authorization: Bearer`` on a plain navigation, and the token must not
ride in a URL (it would land in history, logs and Referer headers). So ``POST /ui/login`` takes
the token from a form and, when it matches, sets a cookie that is:

- ``HttpOnly`` (no script can read it, the dashboard's own included), ``SameSite=Strict`` (never
  sent on a request another site starts: the first defence against cross-site requests),
  ``Path=/ui``, and ``Secure`` when the request came over https;
- not the token itself: ``<issued-at>.<HMAC-SHA256(token, "gpuorch-dashboard:<issued-at>")>``,
  so a leaked cookie is not the API token, expires after ``TTL_S``, and stops working the moment
  the token is changed (every session ends with the old token).

Every form that changes something (cancel, a new cap, resume) also carries a CSRF token tied to
the session: ``HMAC-SHA256(token, "gpuorch-csrf:<cookie>")``. A page of another site can neither
read it nor compute it, it changes with each login, and it ends with the session. Compared in
constant time, like the bearer token. Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac

COOKIE = "gpuorch_session"
TTL_S = 12 * 3600


def _sign(token: str, issued: int) -> str:
    return hmac.new(token.encode(), f"gpuorch-dashboard:{issued}".encode(), hashlib.sha256).hexdigest()


def issue(token: str, now: float) -> str:
    issued = int(now)
    return f"{issued}.{_sign(token, issued)}"


def valid(cookie: str | None, token: str, now: float) -> bool:
    issued_s, _, sig = (cookie or "").partition(".")
    # ASCII digits, at most 12 (a Unix time until year 33658): int() of "²" or of 5,000 digits
    # raises (the page answered 500), and no longer a number can be one this issued.
    if not (issued_s.isascii() and issued_s.isdigit() and len(issued_s) <= 12) or not sig or len(sig) > 128:
        return False
    issued = int(issued_s)
    if not (0 <= now - issued <= TTL_S):
        return False
    return hmac.compare_digest(sig.encode(), _sign(token, issued).encode())


def cookie_header(value: str, *, secure: bool, max_age: int = TTL_S) -> str:
    flags = f"; Max-Age={max_age}; Path=/ui; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    return f"{COOKIE}={value}{flags}"


def csrf(token: str, cookie: str) -> str:
    """The CSRF token the action forms of the session ``cookie`` carry."""
    return hmac.new(token.encode(), f"gpuorch-csrf:{cookie}".encode(), hashlib.sha256).hexdigest()


def csrf_ok(given: str | None, token: str, cookie: str | None) -> bool:
    """Whether ``given`` is the CSRF token of the (already checked) session ``cookie``."""
    if not cookie or not given or len(given) > 128:
        return False
    return hmac.compare_digest(given.encode(), csrf(token, cookie).encode())
