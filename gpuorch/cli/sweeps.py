"""``gpuorch sweep submit|status|cancel``: cost-capped hyperparameter sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import UserInputError
from .app import JSON_OPTION, app, emit_json, fail

sweep_app = typer.Typer(help="Cost-capped hyperparameter sweeps: trials, their metrics and what they cost.",
                        no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")
NAME_ARG = typer.Argument(..., help="Sweep id, or the name of the newest sweep with that name.")


@sweep_app.command("submit")
def submit(file: Path = typer.Argument(..., help="Sweep file (YAML)."), json_out: bool = JSON_OPTION) -> None:
    """Queue a sweep's trials; the daemon runs max_parallel at a time within the budget."""
    from ..clock import utcnow
    from ..sweeps import intent
    from ..sweeps.spec import load_sweep
    from .jobs import _store

    now = utcnow()
    warning = None
    try:
        spec, trials = load_sweep(file, now)
        warning = _deadline_check(spec, trials, str(file), now)
        sweep = intent.submit(_store(), spec, trials, now)
    except UserInputError as e:
        fail(str(e))
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    if json_out:
        emit_json({"id": sweep.id, "name": sweep.name, "trials": len(trials), "status": sweep.status.value})
    else:
        typer.echo(f"sweep {sweep.id} ({sweep.name}): {len(trials)} trials queued; "
                   f"follow it with `gpuorch sweep status {sweep.name}`")


def _deadline_check(spec: Any, trials: list[Any], source: str, now: Any) -> str | None:
    """The trials' deadline checked as ``submit`` checks a job's (gpuorch.submitcheck)."""
    from ..registry import offline_offers
    from ..submitcheck import sweep_deadline_check
    from .app import cli_config

    job = trials[0][1] if trials else None
    needs_offers = job is not None and (job.resources.gpu is not None or job.model is not None)
    cfg = cli_config() if needs_offers else None
    offers = offline_offers(cfg.providers, cfg.home) if cfg is not None else []
    return sweep_deadline_check(spec, trials, offers, source, now)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@sweep_app.command("status")
def status(name: str = NAME_ARG, json_out: bool = JSON_OPTION) -> None:
    """Each trial's parameters, latest metrics, cost and state, best first by the objective."""
    from ..clock import utcnow
    from ..sweeps.intent import find_sweep
    from ..sweeps.report import sweep_report
    from .jobs import _store

    with _store().read() as s:
        try:
            report = sweep_report(s, find_sweep(s, name), utcnow())
        except UserInputError as e:
            fail(str(e))
    if json_out:
        emit_json(report)
        return
    from rich.console import Console
    from rich.table import Table

    cap = f" of ${report['max_cost']:.2f}" if report["max_cost"] is not None else " (no cap)"
    obj = report["objective"]
    typer.echo(f"sweep {report['id']} {report['name']}: {report['status']}"
               + (f" ({report['message']})" if report["message"] else "")
               + f"; spent ${report['spent']:.4f}{cap}"
               + (f"; deadline {report['deadline']:%Y-%m-%d %H:%M} UTC" if report["deadline"] else "")
               + (f"; objective {obj['mode']} {obj['metric']}" if obj else ""))
    params = sorted({k for t in report["trials"] for k in t["params"]})
    metrics = sorted({k for t in report["trials"] for k in t["metrics"]})
    if obj and obj["metric"] in metrics:  # the objective first
        metrics.remove(obj["metric"])
        metrics.insert(0, obj["metric"])
    t = Table("ID", "TRIAL", "STATUS", *params, *metrics, "COST", "NOTE")
    for tr in report["trials"]:
        t.add_row(str(tr["id"]), tr["name"], tr["status"], *[_fmt(tr["params"].get(p, "-")) for p in params],
                  *[_fmt(tr["metrics"].get(m, "-")) for m in metrics], f"${tr['cost']:.4f}", tr["message"] or "")
    Console().print(t)


@sweep_app.command("cancel")
def cancel(name: str = NAME_ARG, json_out: bool = JSON_OPTION) -> None:
    """Stop the sweep: unfinished trials are cancelled and their instances terminated."""
    from ..clock import utcnow
    from ..sweeps import intent
    from .jobs import _store

    try:
        sweep, hit = intent.cancel(_store(), name, utcnow())
    except UserInputError as e:
        fail(str(e))
    if json_out:
        emit_json({"id": sweep.id, "name": sweep.name, "status": sweep.status.value, "trials_cancelled": hit})
    else:
        typer.echo(f"sweep {sweep.id} ({sweep.name}): {sweep.status.value}; {hit} unfinished trials to stop")
