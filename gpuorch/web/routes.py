"""The dashboard's routes under ``/ui``, mounted on the API's FastAPI app by ``mount``.

Pages are GETs over ``JobService`` and the store; the POSTs are log in, log out and the actions
(``web.actions``: cancel, a sweep's cap, resume, each with the session's CSRF token). A request
is let in with the session cookie (``web.session``) or, for scripts and curl, the same
``Authorization: Bearer`` header as the API. A page asked for without either redirects to the
login form; a wrong token there is refused with 401 and nothing set. Pages refresh themselves in
place (``static/live.js``, the one script, served from here: the CSP allows no other).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from gpuorch.errors import UnknownJob, UnknownSweep
from gpuorch.jobs.service import JobService
from gpuorch.web import data, pages, session
from gpuorch.web.actions import mount_actions
from gpuorch.web.forms import NOTICES
from gpuorch.web.sweep_page import SCALES, sweep_page

MAX_FORM = 4096  # bytes of the login form

# Scripts, styles and fetches only from this server (no inline script or style); never framed.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


class _LoginNeeded(Exception):
    def __init__(self, path: str) -> None:
        self.path = path


def _safe_next(v: str | None) -> str:
    """Only a path of this dashboard (no open redirect to another site)."""
    if v and v.startswith("/ui/") and not v.startswith("//") and "\\" not in v and "\n" not in v:
        return v
    return "/ui/jobs"


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


class _Refused(Exception):
    pass


def mount(app: FastAPI, service: JobService, token: str, bearer_ok: Callable[[str | None], bool], *,
          daily_cap: float | None = None, notify_health: data.Health | None = None) -> None:
    """Add ``/ui/...`` to ``app``. ``token`` is the API's (it signs the session cookie and is what
    the form must be given), ``bearer_ok`` the API's check of an ``Authorization`` header,
    ``daily_cap`` the line on the costs page and ``notify_health`` the outbox's delivery counts
    (``notify.outbox.health``, passed in by the API: the notifier is a layer above this one) for
    the daemon page."""
    ui = _Pages(service, token, bearer_ok, daily_cap, notify_health)
    app.add_exception_handler(_Refused, _refused)
    app.add_exception_handler(_LoginNeeded, _login_redirect)
    r = APIRouter(prefix="/ui", include_in_schema=False)  # HTML pages, not the JSON API
    _static_routes(r)
    _login_routes(r, token, bearer_ok)
    _page_routes(r, ui)
    mount_actions(r, service, token, bearer_ok, ui.render, HEADERS)
    app.include_router(r)


def _login_redirect(_r: Request, e: Exception) -> Response:
    assert isinstance(e, _LoginNeeded)
    return RedirectResponse(f"/ui/login?next={quote(e.path)}", status_code=303, headers=HEADERS)


def _refused(_r: Request, _e: Exception) -> Response:
    return _html(pages.login_page("/ui/jobs", "That token was not accepted; use this server's API token."), 401)


def _notice(done: str | None) -> str | None:
    return NOTICES.get(done or "")


class _Pages:
    """Who may see a page (``guard``), and a page drawn for them (``page``, ``render``)."""

    def __init__(self, service: JobService, token: str, bearer_ok: Callable[[str | None], bool],
                 daily_cap: float | None, notify_health: data.Health | None) -> None:
        self.service, self.token, self.bearer_ok = service, token, bearer_ok
        self.daily_cap, self.notify_health = daily_cap, notify_health

    def guard(self, request: Request) -> None:
        header = request.headers.get("authorization")
        if header is not None:  # a script's bearer token: right or refused, never a redirect
            if not self.bearer_ok(header):
                raise _Refused()
            return
        if not session.valid(request.cookies.get(session.COOKIE), self.token, time.time()):
            query = request.url.query  # kept through the login (?scale=log), the notice of an action not
            kept = "&".join(p for p in query.split("&") if p and not p.startswith("done="))
            raise _LoginNeeded(request.url.path + (f"?{kept}" if kept else ""))

    def page(self, request: Request, render: Any) -> Response:
        self.guard(request)
        try:
            return _html(render())
        except (UnknownJob, UnknownSweep) as e:
            return _html(pages.layout("not found", f"<p>{pages.escape(str(e))}</p>"), 404)

    def csrf(self, request: Request) -> str | None:
        """The session's CSRF token for the action forms; None for a bearer-token request (no forms)."""
        if request.headers.get("authorization") is not None:
            return None
        return session.csrf(self.token, request.cookies.get(session.COOKIE) or "")

    def render(self, kind: str, ref: str, error: str, csrf: str | None) -> str:
        """An object's page with the line an action was refused with (``web.actions``)."""
        if kind == "job":
            return pages.job_page(data.job(self.service, ref), self.service.now(), csrf, error=error)
        return sweep_page(data.sweep(self.service, ref), csrf, error=error)


def _static_routes(r: APIRouter) -> None:
    css = files("gpuorch.web").joinpath("static/style.css").read_text()
    script = files("gpuorch.web").joinpath("static/live.js").read_text()

    @r.get("/static/style.css")
    def style() -> Response:
        return Response(css, media_type="text/css", headers={**HEADERS, "Cache-Control": "max-age=3600"})

    @r.get("/static/live.js")
    def live() -> Response:
        return Response(script, media_type="text/javascript", headers={**HEADERS, "Cache-Control": "max-age=3600"})


def _login_routes(r: APIRouter, token: str, bearer_ok: Callable[[str | None], bool]) -> None:
    @r.get("/login")
    def login_form(next: str | None = None) -> Response:  # the query parameter's name
        return _html(pages.login_page(_safe_next(next)))

    @r.post("/login")
    async def login(request: Request) -> Response:
        body = await request.body()
        form = parse_qs(body[:MAX_FORM].decode("utf-8", errors="replace"))
        given = (form.get("token") or [""])[0].strip()
        target = _safe_next((form.get("next") or [""])[0])
        if not given or not bearer_ok(f"Bearer {given}"):
            return _html(pages.login_page(target, "That token was not accepted; use this server's API token."), 401)
        secure = request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"
        resp = RedirectResponse(target, status_code=303, headers=HEADERS)
        resp.headers.append("Set-Cookie", session.cookie_header(session.issue(token, time.time()), secure=secure))
        return resp

    @r.post("/logout")
    def logout() -> Response:
        resp = RedirectResponse("/ui/login", status_code=303, headers=HEADERS)
        resp.headers.append("Set-Cookie", session.cookie_header("", secure=False, max_age=0))
        return resp


def _page_routes(r: APIRouter, ui: _Pages) -> None:
    service, page, csrf = ui.service, ui.page, ui.csrf

    @r.get("")
    @r.get("/")
    def home(request: Request) -> Response:
        ui.guard(request)
        return RedirectResponse("/ui/jobs", status_code=303, headers=HEADERS)

    @r.get("/jobs")
    def jobs(request: Request, done: str | None = None) -> Response:
        return page(request, lambda: pages.jobs_page(data.jobs(service), csrf(request), notice=_notice(done)))

    @r.get("/jobs/{ref}")
    def job(request: Request, ref: str, done: str | None = None) -> Response:
        return page(request, lambda: pages.job_page(data.job(service, ref), service.now(), csrf(request),
                                                    notice=_notice(done)))

    @r.get("/sweeps")
    def sweeps(request: Request) -> Response:
        return page(request, lambda: pages.sweeps_page(data.sweeps(service)))

    @r.get("/sweeps/{ref}")
    def sweep(request: Request, ref: str, scale: str = "auto", done: str | None = None) -> Response:
        if scale not in SCALES:
            ui.guard(request)
            line = f"scale: {scale[:40]!r} is not one of {', '.join(SCALES)}; use ?scale=log or ?scale=linear"
            return _html(pages.layout("not shown", f"<p class=error role=alert>{pages.escape(line)}</p>",
                                      refresh=False), 400)
        return page(request, lambda: sweep_page(data.sweep(service, ref), csrf(request), scale=scale,
                                                notice=_notice(done)))

    @r.get("/costs")
    def costs(request: Request) -> Response:
        return page(request, lambda: pages.costs_page(data.costs(service, ui.daily_cap)))

    @r.get("/daemon")
    def daemon(request: Request) -> Response:
        return page(request, lambda: pages.daemon_page(data.daemon(service, ui.notify_health)))
