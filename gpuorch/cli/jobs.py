"""Job commands: submit, status, logs, cancel, events, daemon.

submit, status, cancel, events and logs act on this host's store through ``JobService``, or,
with ``gpuorch --server URL``, on a remote one through the HTTP API's client, which has the same
methods: the output and the one-line errors are the same either way.
"""

from __future__ import annotations

import codecs
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuorch.bounds import MAX_COUNT
from gpuorch.cli.app import JSON_OPTION, app, cli_config, cli_store_location, emit_json, fail, guard
from gpuorch.cli.output import WIDE_OPTION, daemon_warning, show
from gpuorch.errors import GpuorchError, UserInputError

if TYPE_CHECKING:  # the CLI imports these when a command needs them
    from gpuorch.api.client import Client
    from gpuorch.jobs.service import JobService
    from gpuorch.store import Store

JOB_ARG = typer.Argument(..., help="Job id, or the name of the newest job with that name.")


def _store() -> Store:
    from gpuorch.store import Store

    return Store(cli_config().url)


def _remote(ctx: typer.Context) -> Client | None:
    """The API client when ``--server`` was given, else None."""
    target = ctx.obj
    if target is None or not target.server:
        return None
    from gpuorch.api.client import Client

    return Client(target.server, target.token)


def _backend(ctx: typer.Context) -> JobService | Client:
    """JobService on this host's store, or its HTTP twin for ``--server``."""
    remote = _remote(ctx)
    return remote if remote is not None else _local()


def _local() -> JobService:
    """JobService on this host's store."""
    from gpuorch.jobs.service import JobService

    home, url = cli_store_location()
    # opens the store when needed (status reads SQLite lightly); submit checks the spec against
    # what the configured providers sell (the configuration is read then, not for status)
    return JobService(None, home, url=url, providers=lambda: cli_config().providers)


@contextmanager
def _errors() -> Iterator[None]:
    """One line on stderr and the exit code of ``app.exit_code`` (2 bad input, 3 not found,
    4 refused, 1 runtime: an unreachable server, a full disk)."""
    with guard():
        yield


def _interactive() -> bool:
    """Whether a person can answer a question: stdin and stdout are terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _plan_line(spec: Any) -> str:
    """The offer the daemon would pick today from this host's catalog, as one line."""
    from gpuorch import placement
    from gpuorch.jobs.submitcheck import estimate_options
    from gpuorch.registry import offline_offers

    cfg = cli_config()
    offers = offline_offers(dict(cfg.providers), cfg.home)
    best = placement.candidates(spec, offers, limit=1, options=estimate_options(spec, offers))
    if not best:
        return "plan: no enabled offer fits today; the daemon keeps it queued until one does"
    from gpuorch.reconciler.apply.launching import gang_candidate

    c = gang_candidate(best[0], spec.nodes)  # a gang: every node's price
    o = c.offer
    gpu = f"{o.gpu_count}x{o.gpu}" if o.gpu else "no GPU"
    nodes = f"{spec.nodes} x " if spec.nodes > 1 else ""
    line = (f"plan: {o.provider} {o.zone} {nodes}{o.instance_type} ({gpu}), {'spot' if c.spot else 'on-demand'} "
            f"at ${c.price_per_hour:.4f}/h")
    if c.est_hours > 0:
        storage = f" (${c.est_storage_usd:.2f} of it the volume's storage)" if c.est_storage_usd > 0 else ""
        return line + f"; estimated ${c.est_cost:.2f}{storage}, done in about {c.est_finish_hours:.2f} h"
    return line + "; no estimate of its cost or finish (give model: or deadline.job_hours)"


@app.command()
def submit(ctx: typer.Context, file: Path = typer.Argument(..., help="Job spec (YAML)."),
           yes: bool = typer.Option(False, "-y", "--yes", help="Queue without showing the plan and asking."),
           json_out: bool = JSON_OPTION) -> None:
    """Queue a job; the daemon places and launches it.

    On a terminal it first shows the plan (offer, market, estimated cost and finish) and asks;
    -y, --json or stdin that is not a terminal queue it without asking.

    Example: gpuorch submit configs/examples/tiny-mlp.yaml
    """
    from gpuorch.jobs.spec import load_spec

    with _errors():
        spec = load_spec(file)  # validated here first, remote or not: nothing is sent for a bad spec
        # the daemon runs elsewhere: pin the workdir to an absolute path now (or upload it)
        workdir = (file.parent / spec.workdir).expanduser().resolve() if spec.workdir else None
        remote = _remote(ctx)
        if remote is not None:  # the server checks the fit and the deadline against its own providers
            from gpuorch.jobs.yamlsafe import load_file
            from gpuorch.placement.explain import no_single_instance

            impossible = no_single_instance(spec)  # the server refuses it too; say so before uploading
            if impossible is not None:
                raise UserInputError(impossible)

            job = remote.submit_raw(load_file(file, "the job spec"), str(file), workdir)
        else:
            if workdir is not None:
                spec = spec.model_copy(update={"workdir": str(workdir)})
            if not yes and not json_out and _interactive():  # as `dstack apply`: look before you spend
                typer.echo(_plan_line(spec))
                if not typer.confirm("Queue it?", default=True):
                    typer.echo("not queued", err=True)
                    raise typer.Exit(1)
            job = _local().submit(spec, str(file))  # checks as the server does (gpuorch.jobs.submitcheck)
    warning = job.get("warning")
    if json_out:
        emit_json({**job, "warning": warning})
    else:
        typer.echo(f"job {job['id']} ({job['name']}) queued; follow it with `gpuorch status {job['id']}`")
        if warning:
            typer.echo(f"warning: {warning}", err=True)
        with _errors():
            daemon_warning(_remote(ctx) or _local())


@app.command()
def status(ctx: typer.Context, job: str = typer.Argument(None, help="Show one job in detail."),
           json_out: bool = JSON_OPTION, wide: bool = WIDE_OPTION) -> None:
    """Jobs and where they run; with JOB, its attempts.

    With --json: ``{"daemon": {...}, "jobs": [...]}``, or one job with its ``daemon``.

    Example: gpuorch status; gpuorch status 12 --json
    """
    with _errors():
        backend = _backend(ctx)
        if job is None:
            data = backend.jobs()
        else:
            detail = backend.job(job)
    state = _daemon_state(backend)
    if json_out:  # the daemon's state is in the JSON; the warning line is for people
        # one job: its lease holder (a job row's "daemon") moves into the object, as "holder"
        emit_json({"daemon": state, "jobs": data, "warm": _warm(backend)} if job is None
                  else {**detail, "daemon": state and {**state, "holder": detail.get("daemon")}})
        return
    from rich.console import Console
    from rich.table import Table

    from gpuorch.store.heartbeat import warning

    line = warning(state) if state is not None else None
    if line:
        typer.echo(f"warning: {line}", err=True)

    from gpuorch.jobs.counts import runs_label

    console = Console(soft_wrap=True)  # a long line is never re-wrapped in the middle of a number
    if job is None:  # RUNS: attempts that got an instance; refused launches (no capacity) only as tries
        t = Table("ID", "NAME", "KIND", "STATUS", "RUNS", "PREEMPT", "WHERE", "CHECKPOINT", "COST", "DEADLINE", "NOTE")
        for d in data:  # KIND: job, or dev (a dev box); a server older than dev boxes sends none
            t.add_row(str(d["id"]), d["name"], d.get("kind", "job"), d["status"], runs_label(d), str(d["preemptions"]),
                      d["where"] or "-", d["last_checkpoint"] or "-", f"${d['cost']:.4f}",
                      _deadline_cell(d.get("deadline")), d["message"] or "")
        show(t, wide=wide)
        _warm_table(backend, wide)
        return
    console.print(f"[bold]job {detail['id']} {detail['name']}[/]: {detail['status']}"
                  + (f" ({detail['message']})" if detail["message"] else "")
                  + f"; runs {runs_label(detail)}; cost ${detail['cost']:.4f}; lost work {detail['lost_work_s']:.0f}s")
    if detail["result"] is not None:  # as JSON, the job's own format (never a Python repr)
        typer.echo("result: " + json.dumps(detail["result"], ensure_ascii=False, default=str))
    if detail.get("deadline"):
        console.print(_deadline_line(detail["deadline"]), highlight=False)
    t = Table("#", "STATUS", "REASON", "WHERE", "INSTANCE", "RESUMED FROM", "LAST CKPT", "LOST WORK", "COST")
    for a in detail["attempt_list"]:
        where = f"{a['provider']}/{a['zone']}/{a['instance_type']}/{'spot' if a['spot'] else 'od'}"
        lost = f"{a['lost_work_s']:.0f}s" if a["lost_work_s"] is not None else "-"
        t.add_row(str(a["number"]), a["status"], a["reason"] or "-", where, a["instance_id"] or "-",
                  a["resumed_from"] or "-", a["last_checkpoint"] or "-", lost, f"${a['cost']:.4f}")
    show(t, wide=wide)


def _warm(backend: Any) -> list[dict[str, Any]] | None:
    """The warm instances (spec ``keep_warm``) and their idle cost so far, from the store or the
    API (``GET /v1/warm``); None from a server older than that endpoint."""
    from gpuorch.jobs.service import JobService

    if isinstance(backend, JobService):
        from gpuorch.warm.status import open_periods

        return open_periods(backend, backend.now())
    try:
        return list(backend.warm())
    except GpuorchError:
        return None


def _warm_table(backend: Any, wide: bool) -> None:
    """The warm instances (spec ``keep_warm``) and their idle cost so far."""
    rows = _warm(backend)
    if rows:
        from rich.table import Table

        t = Table("WARM INSTANCE", "WHERE", "STATUS", "LEFT BY JOB", "IDLE", "IDLE COST", "KEPT UNTIL")
        for w in rows:
            where = f"{w['provider']}/{w['zone']}/{w['instance_type']}/{'spot' if w['spot'] else 'od'}"
            t.add_row(w["instance_id"], where, w["status"], str(w["job_id"]), f"{w['idle_s']:.0f}s",
                      f"${w['idle_usd']:.4f}", w["keep_until"][:19])
        show(t, wide=wide)


def _daemon_state(backend: Any) -> dict[str, Any] | None:
    """The daemons' heartbeats; None from a server older than ``GET /v1/daemon`` (status still works)."""
    try:
        return backend.daemon()
    except GpuorchError:
        return None


def _deadline_cell(d: dict[str, Any] | None) -> str:
    """``in 3.2h, slack 1.1h`` (``3.2h late`` once past; no slack when the work is not known)."""
    if not d:
        return "-"
    left = d["left_h"]
    cell = f"in {left:.1f}h" if left >= 0 else f"{-left:.1f}h ago"
    return cell + (f", slack {d['slack_h']:.1f}h" if d.get("slack_h") is not None else "")


def _deadline_line(d: dict[str, Any]) -> str:
    at = d["at"] if isinstance(d["at"], str) else f"{d['at']:%Y-%m-%d %H:%M} UTC"
    work = f" of {d['work_h']:.1f}" if d.get("work_h") else ""
    line = f"deadline {at} ({_deadline_cell(d)}); {d['done_h']:.1f}{work} h of work saved"
    dec = d.get("decision")
    if dec:
        when = dec["ts"] if isinstance(dec["ts"], str) else f"{dec['ts']:%H:%M:%S}"
        line += f"\nlast decision ({when}): {dec['message'].removeprefix('deadline policy ')}"
    return line


@app.command()
def cancel(ctx: typer.Context, job: str = JOB_ARG, json_out: bool = JSON_OPTION) -> None:
    """Ask the daemon to stop a job and terminate its instance.

    Example: gpuorch cancel tiny-mlp
    """
    with _errors():
        j = _backend(ctx).cancel(job)
    if json_out:
        emit_json(j)
    else:
        typer.echo(f"job {j['id']} ({j['name']}): " + ("already " + j["status"] if j["done"] else "cancel requested"))


@app.command()
def logs(ctx: typer.Context, job: str = JOB_ARG,
         follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new output."),
         attempt: int = typer.Option(None, "--attempt", min=1, max=MAX_COUNT,
                                      help="One attempt only (default: all, in order)."),
         json_out: bool = typer.Option(False, "--json", help='One JSON object per line: {"job", "attempt", "line"}.'),
         ) -> None:
    """The job's output, as mirrored to the control host by the daemon.

    Example: gpuorch logs -f train-llama
    """
    offsets: dict[int, int] = {}
    decoders: dict[int, Any] = {}  # per attempt: a character split across two reads still prints whole
    partial: dict[int, str] = {}  # --json: the unfinished last line of each attempt
    with _errors():
        backend = _backend(ctx)
        ref = str(backend.log_state(job)["id"])
        if follow:
            daemon_warning(backend)  # else -f would wait silently for output nobody produces
    while True:
        with _errors():
            state = backend.log_state(ref)  # before reading: output written before "done" is all shown
            numbers = [n for n in state["attempts"] if attempt is None or n == attempt]
            for n in numbers:
                while chunk := backend.read_log(state["id"], n, offsets.get(n, 0)):
                    if len(numbers) > 1 and n not in offsets and not json_out:
                        typer.echo(f"--- attempt {n} ---")
                    decoder = decoders.setdefault(n, codecs.getincrementaldecoder("utf-8")(errors="replace"))
                    text = decoder.decode(chunk)
                    if json_out:
                        *lines, partial[n] = (partial.get(n, "") + text).split("\n")
                        _json_lines(state["id"], n, lines)
                    else:
                        typer.echo(text, nl=False)
                    offsets[n] = offsets.get(n, 0) + len(chunk)
        if not follow or state["done"]:
            if json_out:  # output that does not end with a newline is still a line
                for n, rest in sorted(partial.items()):
                    _json_lines(state["id"], n, [rest] if rest else [])
            return
        time.sleep(1.0)


def _json_lines(job_id: int, attempt: int, lines: list[str]) -> None:
    import json

    if lines:
        typer.echo("\n".join(json.dumps({"job": job_id, "attempt": attempt, "line": x}) for x in lines))


@app.command()
def events(ctx: typer.Context, job: str = typer.Argument(None, help="Only this job's events."),
           limit: int = typer.Option(200, "--limit", min=1, max=MAX_COUNT), json_out: bool = JSON_OPTION) -> None:
    """What happened, newest last.

    Example: gpuorch events tiny-mlp --limit 50
    """
    with _errors():
        data = _backend(ctx).events(job, limit)
    if json_out:
        emit_json(data)
        return
    for e in data:
        where = f"job {e['job_id']}" + (f"/{e['attempt']}" if e["attempt"] is not None else "") if e["job_id"] else "-"
        typer.echo(f"{e['ts']:%Y-%m-%d %H:%M:%S}  {where:<10} {e['kind']:<18} {e['message']}")


@app.command()
def daemon(once: bool = typer.Option(False, "--once", help="Run one reconcile pass and exit."),
           log_format: str = typer.Option(None, "--log-format", metavar="json|text",
                                          help="Log lines on stderr: text, or one JSON object per line."),
           verbose: bool = typer.Option(False, "-v", "--verbose", help="Debug logging.")) -> None:
    """Run the reconciler in the foreground (systemd runs this).

    Example: gpuorch daemon --log-format json
    """
    from gpuorch.ops import daemon as d
    from gpuorch.ops.logfmt import configure_logging
    from gpuorch.ops.malloc import limit_arenas

    limit_arenas()  # before any thread starts

    cfg = cli_config()
    if log_format not in (None, "json", "text"):
        fail(f"--log-format: {log_format!r} is not a format; use json or text")
    configure_logging(log_format or cfg.log_format, "debug" if verbose else cfg.log_level)
    try:
        d.run(cfg, once=once)
    except UserInputError as e:
        fail(str(e))
