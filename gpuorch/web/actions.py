"""The dashboard's actions, each a ``POST`` through the same ``JobService`` calls as the CLI:

- ``/ui/jobs/JOB/cancel`` (``gpuorch cancel``),
- ``/ui/sweeps/SWEEP/cancel`` (``gpuorch sweep cancel``),
- ``/ui/sweeps/SWEEP/budget`` with ``budget`` (``gpuorch sweep update --budget``),
- ``/ui/sweeps/SWEEP/resume`` with an optional ``budget`` (``gpuorch sweep resume``).

The service records each as an event in the change's own transaction (``cancel_requested``,
``sweep_cancelled``, ``sweep_updated``, ``sweep_resumed``), so ``gpuorch events`` and the
notifications see them like the CLI's.

Who may: a logged-in session whose form carries the session's CSRF token (``session.csrf``), from
this site (an ``Origin`` or ``Sec-Fetch-Site`` naming another is refused), or a script with the
API's bearer token (no browser sends that header on its own, so no CSRF token is asked of it).
Refused: 403 (401 for a wrong bearer token), one line naming what is missing, nothing changed. A
bad value: 422 and the object's page with one line naming the field and the fix (the amount is
checked by ``gpuorch.bounds.usd``, as the CLI's). Done: 303 back to the object's page with a
notice (post, redirect, get: a reload never repeats the action).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from gpuorch.bounds import usd
from gpuorch.errors import UnknownJob, UnknownSweep, UserInputError
from gpuorch.jobs.service import JobService
from gpuorch.web import pages, session

MAX_FORM = 4096  # bytes: a CSRF token and an amount
FORM_TYPE = "application/x-www-form-urlencoded"

# render(kind, ref, error line, csrf) -> the object's page showing the line (and its forms again,
# for a session); raises UnknownJob/UnknownSweep
Render = Callable[[str, str, str, str | None], str]


class Refusal(Exception):
    """One line and the status it is answered with; nothing was changed."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status


def _field(name: str, line: str) -> str:
    """The service's line for ``--budget`` names the CLI option; on the page the field is ``budget``."""
    return name + line.removeprefix(f"--{name}") if line.startswith(f"--{name}") else line


def read_form(body: bytes, content_type: str | None, allowed: frozenset[str]) -> dict[str, str]:
    """The urlencoded form of an action: each field at most once, none but ``allowed``."""
    if len(body) > MAX_FORM:
        raise Refusal(413, f"form: over {MAX_FORM} bytes; send only the page's own form")
    if (content_type or "").split(";")[0].strip().lower() != FORM_TYPE:
        raise Refusal(415, f"form: Content-Type must be {FORM_TYPE}; send the page's own form")
    try:
        pairs = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=16, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise Refusal(400, "form: not a UTF-8 urlencoded form of at most 16 fields; send the page's own form") \
            from None
    for name, values in pairs.items():
        if name not in allowed:
            raise Refusal(400, f"form: unknown field {name[:40]!r}; this action takes {', '.join(sorted(allowed))}")
        if len(values) > 1:
            raise Refusal(400, f"{name}: given {len(values)} times; give it once")
    return {k: v[0] for k, v in pairs.items()}


def _same_site(request: Request) -> bool:
    """No ``Origin`` (a script), ``null`` (what a browser sends under the dashboard's own
    ``Referrer-Policy: no-referrer``: it says nothing, so ``Sec-Fetch-Site`` and the CSRF token
    decide), or one naming the host the browser asked for (``Host``, or ``X-Forwarded-Host``
    behind a proxy that rewrites it)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    hosts = {(request.headers.get(h) or "").lower() for h in ("host", "x-forwarded-host")} - {""}
    return urlsplit(origin).netloc.lower() in hosts


def _budget(form: dict[str, str], required: bool) -> float | None:
    """The form's ``budget`` (USD) by the CLI's rule; empty where it may be: None (keep the cap)."""
    text = form.get("budget", "")
    if not text.strip() and not required:
        return None
    return usd(text, "budget")


class _Actions:
    """Who may act, and the answer to an action (see the module docstring)."""

    def __init__(self, token: str, bearer_ok: Callable[[str | None], bool], render: Render,
                 headers: dict[str, str]) -> None:
        self.token, self.bearer_ok, self.render, self.headers = token, bearer_ok, render, headers

    def authorize(self, request: Request) -> bool:
        """Who asks, before the form is read; True for a session (whose form must then carry its CSRF token)."""
        header = request.headers.get("authorization")
        if header is not None:
            if not self.bearer_ok(header):
                raise Refusal(401, "token: not this server's API token; use the token the API was started with")
            return False
        if not session.valid(request.cookies.get(session.COOKIE), self.token, time.time()):
            raise Refusal(403, "session: not logged in, or the session ended; log in at /ui/login and retry")
        if not _same_site(request):
            origin = request.headers.get("origin", "")[:80]
            raise Refusal(403, f"origin: the request came from {origin}, not this dashboard; act from its pages")
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise Refusal(403, "origin: the browser says another site sent this request; act from the dashboard")
        return True

    def _page(self, title: str, line: str, status: int) -> Response:
        return HTMLResponse(pages.layout(title, f"<p class=error role=alert>{pages.escape(line)}</p>", refresh=False),
                            status_code=status, headers=self.headers)

    def answer(self, request: Request, body: bytes, kind: str, ref: str, fields: frozenset[str],
               do: Callable[[dict[str, str]], str]) -> Response:
        by_session = False
        cookie = request.cookies.get(session.COOKIE)
        try:
            by_session = self.authorize(request)
            form = read_form(body, request.headers.get("content-type"), fields | {"csrf"})
            if by_session and not session.csrf_ok(form.get("csrf"), self.token, cookie):
                raise Refusal(403, "csrf: the form's token is missing or not this session's; reload the page "
                                   "and retry")
            done = do(form)
        except Refusal as e:
            return self._page("not done", " ".join(str(e).split()), e.status)
        except (UnknownJob, UnknownSweep) as e:
            return self._page("not found", " ".join(str(e).split()), 404)
        except UserInputError as e:  # a value the service refused: the page again, with the one line
            line = _field("budget", " ".join(str(e).split()))
            again = session.csrf(self.token, cookie or "") if by_session else None
            return HTMLResponse(self.render(kind, ref, line, again), status_code=422, headers=self.headers)
        return RedirectResponse(done, status_code=303, headers=self.headers)


def _cancel_job(service: JobService, ref: str, form: dict[str, str]) -> str:
    """Cancel, then back to the job's page, or to the list with ``back=jobs`` (its rows' forms)."""
    back = form.get("back")
    if back not in (None, "jobs"):
        raise Refusal(400, f"back: {back[:40]!r} is not a page to go back to; send jobs, or leave it out")
    job_id = service.cancel(ref)["id"]
    return "/ui/jobs?done=cancel-listed" if back == "jobs" else f"/ui/jobs/{job_id}?done=cancel"


def mount_actions(r: APIRouter, service: JobService, token: str, bearer_ok: Callable[[str | None], bool],
                  render: Render, headers: dict[str, str]) -> None:
    """Add the action routes to ``r`` (the dashboard's router); ``render`` draws an object's page
    with a refused value's line, ``headers`` are every dashboard answer's."""
    actions = _Actions(token, bearer_ok, render, headers)

    async def act(request: Request, kind: str, ref: str, fields: frozenset[str],
                  do: Callable[[dict[str, str]], str]) -> Response:
        body = await request.body()  # bounded by the API's Guard; the store's work runs off the event loop
        return await run_in_threadpool(actions.answer, request, body, kind, ref, fields, do)

    def sweep_url(answer: dict[str, Any], done: str) -> str:
        return f"/ui/sweeps/{quote(str(answer['id']))}?done={done}"

    @r.post("/jobs/{ref}/cancel")
    async def cancel_job(request: Request, ref: str) -> Response:
        return await act(request, "job", ref, frozenset({"back"}), lambda f: _cancel_job(service, ref, f))

    @r.post("/sweeps/{ref}/cancel")
    async def cancel_sweep(request: Request, ref: str) -> Response:
        return await act(request, "sweep", ref, frozenset(),
                         lambda _f: sweep_url(service.sweep_cancel(ref), "sweep-cancel"))

    @r.post("/sweeps/{ref}/budget")
    async def sweep_budget(request: Request, ref: str) -> Response:
        return await act(request, "sweep", ref, frozenset({"budget"}),
                         lambda f: sweep_url(service.sweep_update(ref, _budget(f, True)), "budget"))

    @r.post("/sweeps/{ref}/resume")
    async def sweep_resume(request: Request, ref: str) -> Response:
        return await act(request, "sweep", ref, frozenset({"budget"}),
                         lambda f: sweep_url(service.sweep_resume(ref, _budget(f, False)), "resume"))
