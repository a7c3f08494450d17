"""The HTTP API's client: ``JobService``'s methods over HTTP, for ``gpuorch --server URL``.

Standard library only (urllib), so a laptop needs nothing beyond gpuorch itself and the CLI
starts as fast as ever. Errors come back as the one line the server wrote: a 4xx raises
``RemoteRefused`` (a ``UserInputError`` with the ``status``: the CLI exits 3 for 404, 4 for 401/403,
2 otherwise), a connection failure or a 5xx raises ``ServerUnavailable`` (exit 1). Redirects
are refused, not followed. The token goes in the ``Authorization`` header, never the URL,
and never into an error message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import date, datetime
from pathlib import Path
from typing import Any

from gpuorch.api import upload
from gpuorch.errors import GpuorchError, UserInputError

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class RemoteRefused(UserInputError):
    """The server answered 4xx (bad token, unknown job, refused spec); ``status`` says which."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the Authorization header (the token) on to
    whatever origin the answer names. A 3xx comes back as an HTTPError instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class ServerUnavailable(GpuorchError):
    """No answer from the server, or a 5xx."""


class Client:
    def __init__(self, url: str, token: str | None, timeout_s: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserInputError(f"--server: {url!r} is not an http(s) URL; write it like http://127.0.0.1:8765")
        self.url, self.token, self.timeout_s = url.rstrip("/"), token, timeout_s
        # A tunnel's local end must not be sent to a proxy from the environment.
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if parts.hostname in LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def _call(self, method: str, path: str, body: Any = None, **query: Any) -> bytes:
        q = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        req = urllib.request.Request(f"{self.url}/v1{path}" + (f"?{q}" if q else ""), method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if body is not None:
            req.data = json.dumps(body, default=_plain).encode()
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            if 300 <= e.code < 400:  # never followed, so the token stays with this origin
                where = e.headers.get("Location", "elsewhere") if e.headers else "elsewhere"
                raise UserInputError(f"--server {self.url}: the server redirects to {where}; give the final URL "
                                     "as --server (the token is never sent on)") from None
            message = _error_line(e)
            if e.code in (401, 403):
                raise RemoteRefused(f"{self.url}: {message}", e.code) from None
            if 400 <= e.code < 500:
                raise RemoteRefused(message, e.code) from None
            raise ServerUnavailable(f"{self.url}: HTTP {e.code}: {message}") from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            raise ServerUnavailable(f"--server {self.url}: cannot connect ({reason}); check the URL and that "
                                    "`gpuorch serve` (or a daemon with api.enabled) runs there") from None

    def _json(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        return json.loads(self._call(method, path, body, **query))

    # -- the JobService methods ----------------------------------------------------------------
    def submit_raw(self, spec: dict[str, Any], source: str, workdir: Path | None) -> dict[str, Any]:
        """Send a spec (already validated here) as written; a workdir goes along as an upload."""
        body = {"spec": {k: v for k, v in spec.items() if k != "workdir"}, "source": source,
                "workdir_tar": upload.pack(workdir) if workdir is not None else None}
        return self._json("POST", "/jobs", body)

    def jobs(self) -> list[dict[str, Any]]:
        return self._json("GET", "/jobs")

    def job(self, ref: str) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{_q(ref)}")

    def cancel(self, ref: str) -> dict[str, Any]:
        return self._json("POST", f"/jobs/{_q(ref)}/cancel")

    def warm(self) -> list[dict[str, Any]]:
        """``GET /v1/warm``: the warm instances (``gpuorch.warm.status.open_periods``); ``keep_until``
        stays its ISO text."""
        return self._json("GET", "/warm")

    def daemon(self) -> dict[str, Any]:
        state = self._json("GET", "/daemon")
        for key in ("last_pass_at", "stopped_at"):  # back to datetimes, as JobService returns them
            if state.get(key):
                state[key] = datetime.fromisoformat(state[key])
        return state

    def events(self, ref: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        rows = self._json("GET", "/events", job=ref, limit=limit)
        for e in rows:  # back to datetimes, as JobService returns them
            e["ts"] = datetime.fromisoformat(e["ts"])
        return rows

    def log_state(self, ref: str) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{_q(ref)}/logs")

    def read_log(self, job_id: int, attempt: int, offset: int = 0) -> bytes:
        return self._call("GET", f"/jobs/{job_id}/logs/{attempt}", offset=offset)

    # -- the JobService sweep methods ----------------------------------------------------------
    def sweep_submit_raw(self, spec: dict[str, Any], source: str, workdir: Path | None) -> dict[str, Any]:
        """Send a sweep (already validated here) as ``gpuorch.sweeps.spec.remote_request`` gives it:
        its template job inline, without a workdir, which goes along as an upload."""
        body = {"spec": spec, "source": source, "workdir_tar": upload.pack(workdir) if workdir is not None else None}
        return self._json("POST", "/sweeps", body)

    def sweeps(self) -> list[dict[str, Any]]:
        return [_sweep_times(w) for w in self._json("GET", "/sweeps")]

    def sweep(self, ref: str) -> dict[str, Any]:
        return _sweep_times(self._json("GET", f"/sweeps/{_q(ref)}"))

    def sweep_cancel(self, ref: str) -> dict[str, Any]:
        return self._json("POST", f"/sweeps/{_q(ref)}/cancel")

    def sweep_update(self, ref: str, budget: float | None = None, deadline: str | None = None) -> dict[str, Any]:
        """The deadline goes as written (``8h``): the server resolves it against its own clock."""
        return _sweep_times(self._json("POST", f"/sweeps/{_q(ref)}/update", {"budget": budget, "deadline": deadline}))

    def sweep_resume(self, ref: str, budget: float | None = None, deadline: str | None = None) -> dict[str, Any]:
        return _sweep_times(self._json("POST", f"/sweeps/{_q(ref)}/resume", {"budget": budget, "deadline": deadline}))


def _sweep_times(report: dict[str, Any]) -> dict[str, Any]:
    """A sweep's deadline back to a datetime, as JobService returns it."""
    if report.get("deadline") is not None:
        report["deadline"] = datetime.fromisoformat(report["deadline"])
    return report


def _plain(v: Any) -> Any:
    """A YAML timestamp or date in a spec (``deadline: 2026-11-28 08:00:00``) as ISO text."""
    if isinstance(v, datetime | date):
        return v.isoformat()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def _q(ref: str) -> str:
    return urllib.parse.quote(str(ref), safe="")


def _error_line(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read())["error"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {e.code} {e.reason}"


__all__ = ["Client", "RemoteRefused", "ServerUnavailable"]
