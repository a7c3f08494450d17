"""Where notifications go: Standard Webhooks endpoints (signed with ``standardwebhooks``) and
apprise channels. Built once when the daemon starts, from ``notifications:`` in its config;
URLs and signing keys are read from the config, a file or the environment then, and live only
in this process: the store knows a route by its name, and logs and errors show a redacted URL.

A send either returns (delivered: the receiver answered 2xx) or raises ``SendFailed``; the
sender retries every failure with back-off, so a receiver that is down, slow or answering 5xx
gets the notification once it recovers (within ``max_tries``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from gpuorch import __version__
from gpuorch.errors import UserInputError
from gpuorch.userfile import read_text

if TYPE_CHECKING:
    from gpuorch.ops.config import AppriseRoute, NotificationsConfig, WebhookRoute

log = logging.getLogger("gpuorch.notify")
MIN_KEY_BYTES, MAX_KEY_BYTES = 24, 64  # the Standard Webhooks specification's symmetric key sizes
KEY_HOWTO = ("make one with: python -c \"import base64,os; print('whsec_'+base64.b64encode(os.urandom(32))"
             ".decode())\"")


class SendFailed(Exception):
    """One try failed; the message is safe to log and store (no URL secret, no key)."""


class Channel(Protocol):
    def send(self, uid: str, body: bytes, doc: dict[str, Any]) -> None: ...


@dataclass
class Route:
    """One destination and the events it wants."""

    name: str
    kind: str  # webhook | apprise
    shown: str  # the URL as logs may show it (redacted)
    channel: Channel
    timeout_s: float
    events: frozenset[str] | None = None
    jobs: tuple[str, ...] = ()
    sweeps: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)  # every secret string, for redaction

    def wants(self, type_: str, job: str | None, sweep: str | None, *, added: bool = False) -> bool:
        """The route's ``events:`` holds ``type_``; with ``jobs:`` or ``sweeps:``, the event is of a
        job or sweep whose name matches one of them (daemon-wide events reach unfiltered routes only),
        or the job's or sweep's ``notify.routes`` names this route (``added``)."""
        if self.events is not None and type_ not in self.events:
            return False
        if added or (not self.jobs and not self.sweeps):
            return True
        return (job is not None and any(fnmatchcase(job, p) for p in self.jobs)) or \
            (sweep is not None and any(fnmatchcase(sweep, p) for p in self.sweeps))

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def redacted_http(url: str) -> str:
    """scheme://host[:port]/... : the user, password, path and query (where tokens live) hidden."""
    p = urlsplit(url)
    port = f":{p.port}" if p.port else ""
    return f"{p.scheme}://{p.hostname}{port}/..." if (p.path not in ("", "/") or p.query) else \
        f"{p.scheme}://{p.hostname}{port}"


def _secret_parts(url: str) -> tuple[str, ...]:
    """The pieces of a URL that may carry a secret (user info, path segments, query values)."""
    p = urlsplit(url)
    parts = [p.username or "", p.password or "", url]
    parts += [seg for seg in re.split(r"[/?&=#]", f"{p.path}?{p.query}") if len(seg) >= 6]
    return tuple(sorted({x for x in parts if x}, key=len, reverse=True))


class Webhook:
    """POSTs the JSON body with the Standard Webhooks headers; the same ``webhook-id`` every try,
    a fresh ``webhook-timestamp`` (receivers refuse stale ones) and its signature."""

    def __init__(self, url: str, key: bytes, timeout_s: float, redact: Any) -> None:
        from standardwebhooks.webhooks import Webhook as Signer

        self.url, self.timeout_s, self._redact = url, timeout_s, redact
        self._signer = Signer(key)

    def send(self, uid: str, body: bytes, doc: dict[str, Any]) -> None:
        now = datetime.now(UTC)  # the receiver's clock judges it: never a test's fake clock
        headers = {"content-type": "application/json", "user-agent": f"gpuorch/{__version__}",
                   "webhook-id": uid, "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": self._signer.sign(uid, now, body)}
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with _NO_REDIRECTS.open(request, timeout=self.timeout_s) as response:
                response.read(1 << 16)
        except urllib.error.HTTPError as e:
            raise SendFailed(f"HTTP {e.code}") from None
        except (OSError, ValueError) as e:  # refused, reset, timed out, DNS, TLS
            raise SendFailed(self._redact(f"{type(e).__name__}: {getattr(e, 'reason', e)}")) from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is a failure: the body must not follow it to another host, unsigned for it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_NoRedirect)


class Apprise:
    """One apprise URL: a chat message, with the title and text the event's body carries."""

    def __init__(self, url: str, redact: Any) -> None:
        import apprise

        self._apprise, self._redact = apprise, redact
        self.notifier = apprise.Apprise()
        self.notifier.add(url)

    def send(self, uid: str, body: bytes, doc: dict[str, Any]) -> None:
        chat = doc.get("chat") or {}
        pool = logging.getLogger("urllib3.connectionpool")  # its debug lines quote the request's path
        level = pool.level
        pool.setLevel(max(level, logging.INFO))
        try:
            with self._apprise.LogCapture(level=logging.WARNING) as captured:
                ok = self.notifier.notify(title=str(chat.get("title") or doc.get("type")),
                                          body=str(chat.get("text") or doc.get("message") or ""))
                said = captured.getvalue()
        finally:
            pool.setLevel(level)
        if not ok:
            last = [line for line in str(said).splitlines() if line.strip()][-1:] or ["apprise reported a failure"]
            raise SendFailed(self._redact(last[0].strip())[:300])


def _read_value(where: str, inline: str | None, env: str | None, file: Path | None, what: str,
                environ: dict[str, str]) -> str:
    if inline is not None:
        return inline
    if env is not None:
        value = environ.get(env, "").strip()
        if not value:
            raise UserInputError(f"{where}: ${env} is not set or empty; export it where the daemon runs (or name a "
                                 "file)")
        return value
    assert file is not None
    value = read_text(file, option=where, what=what, limit=64 << 10).strip()
    if not value:
        raise UserInputError(f"{where}: {file} is empty; write {what} into it")
    return value


def signing_key(text: str, where: str) -> bytes:
    """The Standard Webhooks key: ``whsec_`` (optional) + base64 of 24 to 64 random bytes."""
    raw = text.removeprefix("whsec_")
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise UserInputError(f"{where}: the signing key is not base64 (whsec_ + base64); {KEY_HOWTO}") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise UserInputError(f"{where}: the signing key is {len(key)} bytes; the Standard Webhooks specification "
                             f"asks for {MIN_KEY_BYTES} to {MAX_KEY_BYTES}; {KEY_HOWTO}")
    return key


def _name(route: WebhookRoute | AppriseRoute, kind: str, url: str) -> str:
    # A short hash of the URL: stable across reorderings of the config, and no secret in the store.
    return route.name or f"{kind}-{hashlib.sha256(url.encode()).hexdigest()[:10]}"


def _filters(route: WebhookRoute | AppriseRoute) -> dict[str, Any]:
    return {"events": frozenset(route.events) if route.events is not None else None,
            "jobs": tuple(route.jobs or ()), "sweeps": tuple(route.sweeps or ())}


def build_routes(config: NotificationsConfig, environ: dict[str, str] | None = None) -> list[Route]:
    """Every route of ``config``, its URL, key and apprise plugin checked now: UserInputError (one
    line naming the field and the fix) for anything that cannot work, before the daemon is READY."""
    from gpuorch.ops.config import _http_url

    environ = dict(os.environ) if environ is None else environ
    if config.webhooks:
        try:
            import standardwebhooks  # noqa: F401
        except ImportError:
            raise UserInputError("notifications.webhooks: the standardwebhooks package is not installed; "
                                 "pip install -e '.[notify]' in gpuorch's checkout") from None
    routes: list[Route] = []
    for i, w in enumerate(config.webhooks):
        where = f"notifications.webhooks[{i}]"
        url = _read_value(f"{where}.url", w.url.get_secret_value() if w.url else None, w.url_env, w.url_file,
                          "the webhook URL", environ)
        try:
            _http_url(url)
        except ValueError as e:
            raise UserInputError(f"{where}.url: {e}") from None
        key_text = _read_value(f"{where}.secret_{'env' if w.secret_env else 'file'}", None, w.secret_env,
                               w.secret_file, "the signing key", environ)
        key = signing_key(key_text, f"{where}.secret_{'env' if w.secret_env else 'file'}")
        secrets = (*_secret_parts(url), key_text)
        route = Route(_name(w, "webhook", url), "webhook", redacted_http(url), None,  # type: ignore[arg-type]
                      float(w.timeout_s), secrets=secrets, **_filters(w))
        route.channel = Webhook(url, key, float(w.timeout_s), route.redact)
        routes.append(route)
    for i, a in enumerate(config.apprise):
        where = f"notifications.apprise[{i}]"
        url = _read_value(f"{where}.url", a.url.get_secret_value() if a.url else None, a.url_env, a.url_file,
                          "the apprise URL", environ)
        shown = _apprise_shown(url, f"{where}.url")
        route = Route(_name(a, "apprise", url), "apprise", shown, None, 60.0,  # type: ignore[arg-type]
                      secrets=_secret_parts(url), **_filters(a))
        route.channel = Apprise(url, route.redact)
        routes.append(route)
    names = [r.name for r in routes]
    if len(names) != len(set(names)):
        raise UserInputError("notifications: two routes have the same URL; remove one, or give each a name")
    return routes


def _quiet_apprise(where: str) -> Any:
    """The apprise module, its own log lines kept out of ours: they quote whole URLs, tokens and
    all. A send captures them (``LogCapture``) and keeps a redacted last line as the failure."""
    try:
        import apprise
    except ImportError:
        raise UserInputError(f"{where}: apprise is not installed; pip install -e '.[notify]' in gpuorch's "
                             "checkout") from None
    logging.getLogger("apprise").propagate = False
    return apprise


def _apprise_shown(url: str, where: str) -> str:
    """apprise's own parse of ``url`` (its privacy form for logs); UserInputError if it has none."""
    apprise = _quiet_apprise(where)
    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if not plugin:
        scheme = url.split("://", 1)[0][:32]
        raise UserInputError(f"{where}: apprise cannot use this URL (scheme {scheme!r} unknown or its parts "
                             "invalid); see https://github.com/caronc/apprise/wiki for each service's URL form")
    private = str(plugin.url(privacy=True))  # passwords masked by apprise; paths and queries still shown
    scheme, _, rest = private.partition("://")
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return f"{scheme}://{host}" + ("/..." if len(rest) > len(host) else "")
