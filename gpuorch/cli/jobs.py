"""Job commands: submit, status, logs, cancel, events, daemon."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import typer

from ..errors import UserInputError
from .app import JSON_OPTION, app, emit_json, fail

JOB_ARG = typer.Argument(..., help="Job id, or the name of the newest job with that name.")


def _store():  # type: ignore[no-untyped-def]
    from ..config import load_config
    from ..store import Store

    return Store(load_config().url)


def _now():  # type: ignore[no-untyped-def]
    from ..clock import utcnow

    return utcnow()


@app.command()
def submit(file: Path = typer.Argument(..., help="Job spec (YAML)."), json_out: bool = JSON_OPTION) -> None:
    """Queue a job; the daemon places and launches it."""
    from .. import jobs
    from ..spec import load_spec

    try:
        spec = load_spec(file)
    except UserInputError as e:
        fail(str(e))
    if spec.workdir:  # the daemon runs elsewhere: pin the workdir to an absolute path now
        spec = spec.model_copy(update={"workdir": str((file.parent / spec.workdir).expanduser().resolve())})
    job = jobs.submit(_store(), spec, _now())
    if json_out:
        emit_json({"id": job.id, "name": job.name, "status": job.status.value})
    else:
        typer.echo(f"job {job.id} ({job.name}) queued; follow it with `gpuorch status {job.id}`")


def _job_summary(job, attempts, now) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from ..cost import attempt_cost

    cur = attempts[-1] if attempts else None
    return {
        "id": job.id,
        "name": job.name,
        "status": job.status.value,
        "message": job.message,
        "attempts": len(attempts),
        "preemptions": job.preemptions,
        "failures": job.failures,
        "where": f"{cur.provider}/{cur.zone}/{cur.instance_type}/{'spot' if cur.spot else 'on-demand'}" if cur else None,
        "last_checkpoint": next((a.last_checkpoint for a in reversed(attempts) if a.last_checkpoint), None),
        "cost": round(sum(attempt_cost(a, now) for a in attempts), 4),
        "lost_work_s": round(sum(a.lost_work_s or 0.0 for a in attempts), 1),
        "exit_code": job.exit_code,
        "result": json.loads(job.result) if job.result else None,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
    }


def _attempt_dict(a, now) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from ..cost import attempt_cost

    return {
        "number": a.number, "status": a.status.value, "reason": a.reason.value if a.reason else None,
        "provider": a.provider, "region": a.region, "zone": a.zone, "instance_type": a.instance_type,
        "gpu": a.gpu, "gpu_count": a.gpu_count, "spot": a.spot, "price_per_hour": a.price_per_hour,
        "instance_id": a.instance_id, "resumed_from": a.resumed_from, "last_checkpoint": a.last_checkpoint,
        "lost_work_s": a.lost_work_s, "exit_code": a.exit_code, "message": a.message,
        "requested_at": a.requested_at, "started_at": a.started_at, "notice_at": a.notice_at, "ended_at": a.ended_at,
        "cost": round(attempt_cost(a, now), 4),
    }


@app.command()
def status(job: str = typer.Argument(None, help="Show one job in detail."), json_out: bool = JSON_OPTION) -> None:
    """Jobs and where they run; with JOB, its attempts."""
    from sqlmodel import select

    from .. import jobs
    from ..store.models import Job

    store, now = _store(), _now()
    with store.read() as s:
        if job is None:
            rows = list(s.exec(select(Job).order_by(Job.id)))  # type: ignore[arg-type]
            data = [_job_summary(j, jobs.attempts_of(s, j.id), now) for j in rows]
        else:
            try:
                j = jobs.find_job(s, job)
            except UserInputError as e:
                fail(str(e))
            atts = jobs.attempts_of(s, j.id)
            detail = _job_summary(j, atts, now) | {"attempt_list": [_attempt_dict(a, now) for a in atts]}
    if json_out:
        emit_json(data if job is None else detail)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if job is None:
        t = Table("ID", "NAME", "STATUS", "ATT", "PREEMPT", "WHERE", "CHECKPOINT", "COST", "NOTE")
        for d in data:
            t.add_row(str(d["id"]), d["name"], d["status"], str(d["attempts"]), str(d["preemptions"]), d["where"] or "-",
                      d["last_checkpoint"] or "-", f"${d['cost']:.4f}", d["message"] or "")
        console.print(t)
        return
    console.print(f"[bold]job {detail['id']} {detail['name']}[/]: {detail['status']}"
                  + (f" ({detail['message']})" if detail["message"] else "")
                  + f"; cost ${detail['cost']:.4f}; lost work {detail['lost_work_s']:.0f}s; result {detail['result']}")
    t = Table("#", "STATUS", "REASON", "WHERE", "INSTANCE", "RESUMED FROM", "LAST CKPT", "LOST WORK", "COST")
    for a in detail["attempt_list"]:
        where = f"{a['provider']}/{a['zone']}/{a['instance_type']}/{'spot' if a['spot'] else 'od'}"
        lost = f"{a['lost_work_s']:.0f}s" if a["lost_work_s"] is not None else "-"
        t.add_row(str(a["number"]), a["status"], a["reason"] or "-", where, a["instance_id"] or "-",
                  a["resumed_from"] or "-", a["last_checkpoint"] or "-", lost, f"${a['cost']:.4f}")
    console.print(t)


@app.command()
def cancel(job: str = JOB_ARG, json_out: bool = JSON_OPTION) -> None:
    """Ask the daemon to stop a job and terminate its instance."""
    from .. import jobs

    try:
        j = jobs.cancel(_store(), job, _now())
    except UserInputError as e:
        fail(str(e))
    if json_out:
        emit_json({"id": j.id, "status": j.status.value, "cancel_requested": j.cancel_requested})
    else:
        typer.echo(f"job {j.id} ({j.name}): " + ("already " + j.status.value if j.status.terminal else "cancel requested"))


@app.command()
def logs(job: str = JOB_ARG, follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new output."),
         attempt: int = typer.Option(None, "--attempt", help="One attempt only (default: all, in order).")) -> None:
    """The job's output, as mirrored to this host by the daemon."""
    from .. import jobs
    from ..config import load_config
    from ..logmirror import LogMirror
    from ..store.models import Job

    config = load_config()
    store, mirror = _store(), LogMirror(config.home)
    try:
        with store.read() as s:
            j = jobs.find_job(s, job)
    except UserInputError as e:
        fail(str(e))
    offsets: dict[int, int] = {}
    while True:
        with store.read() as s:
            numbers = [a.number for a in jobs.attempts_of(s, j.id) if attempt is None or a.number == attempt]
            done = s.get(Job, j.id).status.terminal  # type: ignore[union-attr]
        for n in numbers:
            p = mirror.path(j.id, n)
            if not p.exists():
                continue
            with p.open("rb") as f:
                f.seek(offsets.get(n, 0))
                chunk = f.read()
            if chunk:
                if len(numbers) > 1 and n not in offsets:
                    typer.echo(f"--- attempt {n} ---")
                typer.echo(chunk.decode(errors="replace"), nl=False)
            offsets[n] = offsets.get(n, 0) + len(chunk)
        if not follow or done:
            return
        time.sleep(1.0)


@app.command()
def events(job: str = typer.Argument(None, help="Only this job's events."),
           limit: int = typer.Option(200, "--limit", min=1), json_out: bool = JSON_OPTION) -> None:
    """What happened, newest last."""
    from sqlmodel import select

    from .. import jobs
    from ..store.models import Event

    store = _store()
    with store.read() as s:
        q = select(Event)
        if job is not None:
            try:
                q = q.where(Event.job_id == jobs.find_job(s, job).id)
            except UserInputError as e:
                fail(str(e))
        rows = list(s.exec(q.order_by(Event.id.desc()).limit(limit)))[::-1]  # type: ignore[union-attr]
    data = [{"ts": e.ts, "job_id": e.job_id, "attempt": e.attempt, "kind": e.kind, "message": e.message,
             "data": json.loads(e.data) if e.data else None} for e in rows]
    if json_out:
        emit_json(data)
        return
    for e in data:
        where = f"job {e['job_id']}" + (f"/{e['attempt']}" if e["attempt"] is not None else "") if e["job_id"] else "-"
        typer.echo(f"{e['ts']:%Y-%m-%d %H:%M:%S}  {where:<10} {e['kind']:<18} {e['message']}")


@app.command()
def daemon(once: bool = typer.Option(False, "--once", help="Run one reconcile pass and exit."),
           config: Path = typer.Option(None, "--config", help="Daemon configuration (YAML)."),
           verbose: bool = typer.Option(False, "-v", "--verbose")) -> None:
    """Run the reconciler in the foreground (systemd runs this)."""
    from .. import daemon as d
    from ..config import load_config

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(config)
        d.run(cfg, once=once)
    except UserInputError as e:
        fail(str(e))
