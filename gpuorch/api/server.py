"""The HTTP API: FastAPI endpoints over ``JobService`` (jobs and sweeps), served by uvicorn.

Every endpoint but ``GET /v1/health`` needs ``Authorization: Bearer <token>`` (``auth.py``).
Errors are ``{"error": "<one line>"}``: 401 for a missing or wrong token, 404 for an unknown
job or sweep, 422 for a spec or request the server refuses (the same line the CLI prints locally: a
submit is checked by ``JobService.submit`` against this host's providers, deadline included), and
JSON bodies are encoded like ``gpuorch ... --json`` so the CLI prints the same bytes either way.
Endpoints are plain ``def``: FastAPI runs them in its thread pool, off the event loop.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from gpuorch.api import auth, upload
from gpuorch.api.guard import Guard
from gpuorch.api.strictjson import StrictJsonRoute
from gpuorch.bounds import MAX_INT64, Usd, fix_hint
from gpuorch.errors import UnknownSweep, UserInputError, runtime_line
from gpuorch.jobs.intent import UnknownJob
from gpuorch.jobs.service import JobService
from gpuorch.jobs.spec import parse_spec
from gpuorch.notify import outbox
from gpuorch.ops.config import ApiConfig, DaemonConfig
from gpuorch.ops.diskfull import is_disk_full
from gpuorch.placement.explain import no_single_instance
from gpuorch.store import Store
from gpuorch.sweeps.spec import parse_sweep
from gpuorch.web import routes as dashboard

log = logging.getLogger("gpuorch.api")


class SubmitRequest(BaseModel):
    spec: dict[str, Any]  # the job spec as the user wrote it, without ``workdir``
    source: str = "job spec"  # names the spec in error lines (the CLI sends the file name)
    workdir_tar: str | None = None  # base64 of a gzipped tar of the workdir (upload.py)


class SweepSubmitRequest(BaseModel):
    spec: dict[str, Any]  # the sweep as the user wrote it, its template job inline and without ``workdir``
    source: str = "sweep file"  # names the sweep in error lines (the CLI sends the file name)
    workdir_tar: str | None = None  # base64 of a gzipped tar of the template job's workdir (upload.py)


class SweepLimitsRequest(BaseModel):
    """``sweep update`` / ``sweep resume``: a new cap (USD) and/or deadline (``8h`` or an ISO time,
    resolved against the server's clock, as ``sweep submit``'s is)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    budget: Usd | None = None
    deadline: str | None = Field(default=None, max_length=200)


Id = Annotated[int, PathParam(ge=1, le=MAX_INT64)]  # what the store's INTEGER holds; past it: a 422, not a 500


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, indent=2, default=str) + "\n", status_code=status, media_type="application/json")


def _error(status: int, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    line = " ".join(str(message).split())  # one line, whatever the message held
    return JSONResponse({"error": line, "detail": line}, status_code=status, headers=headers)


def _referenced_uploads(service: JobService) -> set[str]:
    """The workdirs of every stored job: an upload one of them names is kept."""
    from sqlmodel import select

    from gpuorch.store.models import Job

    out = set()
    with service.store.read() as s:
        for text in s.exec(select(Job.spec)):
            try:
                workdir = json.loads(text).get("workdir")
            except (ValueError, AttributeError):
                continue
            if workdir:
                out.add(str(workdir))
    return out


def create_app(service: JobService, token: str, uploads: Path, limits: ApiConfig | None = None, *,
               daily_cap: float | None = None) -> FastAPI:
    """The API over ``service``; ``limits`` (body, upload bytes and files) default to ``ApiConfig``'s;
    ``daily_cap`` is the line on the dashboard's costs page."""
    limits = limits or ApiConfig()
    app = FastAPI(title="gpuorch", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, token=token, max_body=limits.max_body_bytes)  # before FastAPI reads the body
    dashboard.mount(app, service, token, lambda header: auth.check(header, token) is None, daily_cap=daily_cap,
                    notify_health=outbox.health)  # /ui: the web dashboard (gpuorch/web)
    workdirs = _Uploads(service, uploads, limits)
    app.state.sweep_uploads = workdirs.sweep

    def authorized(request: Request) -> None:
        why = auth.check(request.headers.get("authorization"), token)
        if why is not None:
            raise _Refused(401, why)

    _add_error_handlers(app)

    @app.get("/v1/health")
    def health() -> Response:
        return _json({"ok": True})

    # StrictJsonRoute: NaN, Infinity and 1e400 in a body are a 400 naming the field (api/strictjson.py)
    r = APIRouter(prefix="/v1", dependencies=[Depends(authorized)], route_class=StrictJsonRoute)
    _job_routes(r, service, workdirs.unpack)
    _sweep_routes(r, service, workdirs.unpack)
    app.include_router(r)
    return app


class _Uploads:
    """The uploaded workdirs under ``root``: unpacked from a submit, swept of those no job references."""

    def __init__(self, service: JobService, root: Path, limits: ApiConfig) -> None:
        self.service, self.root, self.limits = service, root, limits
        self.swept_at = 0.0

    def sweep(self, force: bool = False) -> None:
        """Uploads no job references (a refused submit's, a crash between unpack and store):
        removed at most hourly, from a submit (no thread of its own)."""
        now = time.time()
        if force or now - self.swept_at > upload.SWEEP_EVERY_S:
            self.swept_at = now
            upload.sweep(self.root, _referenced_uploads(self.service), now)

    def unpack(self, data: str | None) -> Path | None:
        if data is None:
            return None
        self.sweep()
        return upload.unpack(data, self.root, max_bytes=self.limits.max_upload_bytes,
                             max_files=self.limits.max_upload_files)


def _http(_r: Request, e: Exception) -> JSONResponse:
    status, detail = e.status_code, str(e.detail)  # type: ignore[attr-defined]
    if status == 400 and "parsing the body" in detail:  # FastAPI's words for a body json cannot read
        detail = "request: body: not JSON that can be read (malformed or nested too deeply); send a JSON object"
    return _error(status, detail)


def _invalid(_r: Request, e: Exception) -> JSONResponse:
    err = e.errors()[0]  # type: ignore[attr-defined]
    status = 400 if err.get("type") == "json_invalid" else 422  # not JSON at all: a bad request
    return _error(status, f"request: {'.'.join(str(x) for x in err['loc'])}: "
                          f"{fix_hint(err) or str(err['msg']).removeprefix('Value error, ')}")


def _unexpected(_r: Request, e: Exception) -> JSONResponse:  # a bug or the disk: one line, logged
    log.error("API request failed: %s", runtime_line(e), exc_info=not is_disk_full(e))
    return _error(500, runtime_line(e))


def _add_error_handlers(app: FastAPI) -> None:
    """Every error a one-line ``{"error": ...}``: 401, 404, 422, 400 for what is not JSON, 500 for a bug."""
    app.add_exception_handler(_Refused, lambda _r, e: _error(e.status, str(e)))
    app.add_exception_handler(UnknownJob, lambda _r, e: _error(404, str(e)))
    app.add_exception_handler(UnknownSweep, lambda _r, e: _error(404, str(e)))
    app.add_exception_handler(UserInputError, lambda _r, e: _error(422, str(e)))
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(RecursionError, lambda _r, e: _error(400, "request: nested too deeply; flatten it"))
    app.add_exception_handler(Exception, _unexpected)


def _submit_unpacked(unpacked: Path | None, submit: Callable[[], Any]) -> Response:
    """``submit()`` as a 201; a refusal removes the upload it was given (nothing of it is kept)."""
    try:
        return _json(submit(), 201)  # the same checks as a local submit
    except UserInputError:
        if unpacked is not None:
            shutil.rmtree(unpacked, ignore_errors=True)
        raise


def _job_routes(r: APIRouter, service: JobService, unpack: Callable[[str | None], Path | None]) -> None:
    @r.post("/jobs")
    def submit(body: SubmitRequest) -> Response:
        if "workdir" in body.spec:
            raise UserInputError(f"{body.source}: workdir: a path on the submitting machine means nothing to the "
                                 "server; send the directory as workdir_tar (`gpuorch --server URL submit` does)")
        spec = parse_spec(body.spec, body.source)
        impossible = no_single_instance(spec)  # refuse before unpacking the upload
        if impossible is not None:
            raise UserInputError(impossible)
        unpacked = unpack(body.workdir_tar)
        if unpacked is not None:
            spec = spec.model_copy(update={"workdir": str(unpacked)})
        return _submit_unpacked(unpacked, lambda: service.submit(spec, body.source))

    @r.get("/jobs")
    def jobs() -> Response:
        return _json(service.jobs())

    @r.get("/jobs/{ref}")
    def job(ref: str) -> Response:
        return _json(service.job(ref))

    @r.get("/daemon")
    def daemon() -> Response:
        return _json(service.daemon())

    @r.get("/warm")
    def warm() -> Response:  # the warm instances (spec keep_warm) and their idle cost so far
        from gpuorch.warm.status import open_periods

        return _json(open_periods(service, service.now()))

    @r.post("/jobs/{ref}/cancel")
    def cancel(ref: str) -> Response:
        return _json(service.cancel(ref))

    @r.get("/events")
    def events(job: str | None = None, limit: int = Query(200, ge=1, le=100_000)) -> Response:
        return _json(service.events(job, limit))

    @r.get("/jobs/{ref}/logs")
    def log_state(ref: str) -> Response:
        return _json(service.log_state(ref))

    @r.get("/jobs/{job_id}/logs/{attempt}")
    def read_log(job_id: Id, attempt: Id, offset: int = Query(0, ge=0, le=MAX_INT64)) -> Response:
        return Response(service.read_log(job_id, attempt, offset), media_type="application/octet-stream")


def _sweep_routes(r: APIRouter, service: JobService, unpack: Callable[[str | None], Path | None]) -> None:
    @r.post("/sweeps")
    def sweep_submit(body: SweepSubmitRequest) -> Response:
        spec, trials = parse_sweep(body.spec, body.source, service.now())  # refuse before unpacking the upload
        unpacked = unpack(body.workdir_tar)
        if unpacked is not None:  # every trial runs in the one uploaded copy
            trials = [(params, job.model_copy(update={"workdir": str(unpacked)})) for params, job in trials]
        return _submit_unpacked(unpacked, lambda: service.sweep_submit(spec, trials, body.source))

    @r.get("/sweeps")
    def sweeps() -> Response:
        return _json(service.sweeps())

    @r.get("/sweeps/{ref}")
    def sweep(ref: str) -> Response:
        return _json(service.sweep(ref))

    @r.post("/sweeps/{ref}/cancel")
    def sweep_cancel(ref: str) -> Response:
        return _json(service.sweep_cancel(ref))

    @r.post("/sweeps/{ref}/update")
    def sweep_update(ref: str, body: SweepLimitsRequest) -> Response:
        return _json(service.sweep_update(ref, body.budget, body.deadline))

    @r.post("/sweeps/{ref}/resume")
    def sweep_resume(ref: str, body: SweepLimitsRequest) -> Response:
        return _json(service.sweep_resume(ref, body.budget, body.deadline))


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family)
    except OSError as e:
        raise UserInputError(
            f"api: cannot listen on {host}:{port} ({e.strerror or e}); pick another api.host/api.port"
        ) from None


def _server(config: DaemonConfig, store: Store, host: str) -> uvicorn.Server:
    token = auth.server_token(config.api)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        log.warning("the API listens on %s without TLS: tokens and jobs cross the network in clear; "
                    "prefer 127.0.0.1 with an SSH tunnel, or a TLS-terminating proxy", host)
    app = create_app(JobService(store, config.home, providers=config.providers), token, config.home / "uploads",
                     config.api, daily_cap=config.daily_budget)
    # log_config=None: keep the process's logging (the daemon's format), not uvicorn's own
    return uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=True, timeout_graceful_shutdown=5))


def serve(config: DaemonConfig, host: str | None = None, port: int | None = None) -> None:
    """Serve in the foreground until SIGTERM/SIGINT (uvicorn handles them in the main thread)."""
    host = host or config.api.host
    port = config.api.port if port is None else port
    store = Store(config.url)
    server = _server(config, store, host)
    sock = _bind(host, port)
    log.info("API on http://%s:%d (store %s)", host, sock.getsockname()[1], store.url)
    try:
        server.run(sockets=[sock])
    finally:
        store.close()


class ApiThread:
    """The API served from a thread of this process (the daemon with ``api.enabled``, tests).

    ``start`` returns once it accepts connections on ``port`` (the bound one, for port 0);
    ``stop`` shuts it down gracefully and waits for the thread.
    """

    def __init__(self, config: DaemonConfig, store: Store, host: str | None = None, port: int | None = None) -> None:
        host = host or config.api.host
        self.server = _server(config, store, host)
        self._sock = _bind(host, config.api.port if port is None else port)
        self.host, self.port = host, self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]},
                                        name="gpuorch-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ApiThread:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start; see the log above")
            time.sleep(0.01)
        log.info("API on %s", self.url)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(30)
        self._sock.close()
