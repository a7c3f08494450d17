"""``gpuorch sweep submit|status|update|resume|cancel``: cost-capped hyperparameter sweeps.

Like the job commands (``jobs.py``), they act on this host's store through ``JobService``, or, with
``gpuorch --server URL``, on a remote one through the HTTP API's client: the same output and the
same one-line errors either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json
from gpuorch.cli.output import WIDE_OPTION, show

if TYPE_CHECKING:
    from rich.table import Table

sweep_app = typer.Typer(help="Cost-capped hyperparameter sweeps: trials, their metrics and what they cost.",
                        no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")
NAME_ARG = typer.Argument(..., help="Sweep id, or the name of the newest sweep with that name.")


@sweep_app.command("submit")
def submit(ctx: typer.Context, file: Path = typer.Argument(..., help="Sweep file (YAML)."),
           json_out: bool = JSON_OPTION) -> None:
    """Queue a sweep's trials; the daemon runs max_parallel at a time within the budget.

    Example: gpuorch sweep submit configs/examples/tiny-mlp-sweep.yaml
    """
    from gpuorch.cli.jobs import _errors, _local, _remote
    from gpuorch.clock import utcnow
    from gpuorch.sweeps.spec import load_sweep

    with _errors():
        spec, trials = load_sweep(file, utcnow())  # validated here first, remote or not: nothing is sent for a bad one
        remote = _remote(ctx)
        if remote is not None:  # the server checks the deadline against its own providers
            from gpuorch.sweeps.spec import remote_request

            data, workdir = remote_request(file)
            sweep = remote.sweep_submit_raw(data, str(file), workdir)
        else:
            sweep = _local().sweep_submit(spec, trials, str(file))  # checks as the server does
    warning = sweep.get("warning")
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    if json_out:
        emit_json({**sweep, "warning": warning})
    else:
        typer.echo(f"sweep {sweep['id']} ({sweep['name']}): {sweep['trials']} trials queued; "
                   f"follow it with `gpuorch sweep status {sweep['name']}`")


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _cap(report: dict[str, Any]) -> str:
    return f"${report['max_cost']:.2f}" if report["max_cost"] is not None else "(no cap)"


@sweep_app.command("status")
def status(ctx: typer.Context,
           name: str = typer.Argument(None, help="Sweep id, or the name of the newest sweep with that name; "
                                                 "without it, every sweep."),
           json_out: bool = JSON_OPTION, wide: bool = WIDE_OPTION) -> None:
    """Each trial's parameters, latest metrics, cost and state, best first by the objective;
    without NAME, every sweep's state, spend and best trial.

    Example: gpuorch sweep status tiny-mlp-sweep --wide
    """
    from gpuorch.cli.jobs import _backend, _errors

    with _errors():
        backend = _backend(ctx)
        report = backend.sweeps() if name is None else backend.sweep(name)
    if json_out:
        emit_json(report)
        return
    from gpuorch.cli.output import daemon_warning

    daemon_warning(backend)
    if name is None:
        _show_sweeps(report, wide)
    else:
        _show_sweep(report, wide)


def _show_sweeps(report: list[dict[str, Any]], wide: bool) -> None:
    """Every sweep: its state, trial counts, spend, cap, deadline and best trial."""
    from rich.table import Table

    t = Table("ID", "NAME", "STATUS", "TRIALS", "SPENT", "CAP", "DEADLINE", "BEST")
    for w in report:
        obj, best = w["objective"], w["best"]
        t.add_row(str(w["id"]), w["name"], w["status"],
                  ", ".join(f"{n} {s}" for s, n in sorted(w["counts"].items())) or "-",
                  f"${w['spent']:.4f}", _cap(w), f"{w['deadline']:%Y-%m-%d %H:%M}" if w["deadline"] else "-",
                  _best(best, obj) if best else "-")
    show(t, wide=wide)


def _show_sweep(report: dict[str, Any], wide: bool) -> None:
    """One sweep: a summary line, its trials best first, the best trial, and where the money went."""
    cap = f" of {_cap(report)}" if report["max_cost"] is not None else " (no cap)"
    obj = report["objective"]
    typer.echo(f"sweep {report['id']} {report['name']}: {report['status']}"
               + (f" ({report['message']})" if report["message"] else "")
               + f"; spent ${report['spent']:.4f}{cap}"
               + (f"; deadline {report['deadline']:%Y-%m-%d %H:%M} UTC" if report["deadline"] else "")
               + (f"; objective {obj['mode']} {obj['metric']}" if obj else ""))
    show(_trial_table(report), wide=wide)
    if report["best"] is not None:
        typer.echo(f"best: {_best(report['best'], obj)}")
    sp = report["spend"]
    typer.echo(f"spend ${report['spent']:.4f}: " + ", ".join(f"${sp[k]:.4f} {k}" for k in sp if sp[k] or k in (
        "finished", "pruned", "held", "wasted")) + f" ({report['wasted_share']:.0%} wasted)")
    if report.get("left") is not None and report.get("no_more"):  # why the rest of the cap bought no more trials
        typer.echo(f"left ${report['left']:.4f} of the cap; no further trial: {report['no_more']}")


def _trial_table(report: dict[str, Any]) -> Table:
    """The trials: parameters, the result or the objective's metric first, then runtime, runs and cost."""
    from rich.table import Table

    from gpuorch.jobs.counts import runs_label  # RUNS: attempts that got an instance, tries beside

    obj = report["objective"]
    params = sorted({k for t in report["trials"] for k in t["params"]})
    metrics = sorted({k for t in report["trials"] for k in t["metrics"]})
    if obj and obj["metric"] in metrics:  # the objective first
        metrics.remove(obj["metric"])
        metrics.insert(0, obj["metric"])
    by_result = bool(obj) and obj.get("source") == "result"
    t = Table("ID", "TRIAL", "STATUS", *params, *(["RESULT"] if by_result else []), *metrics, "RUNTIME", "RUNS",
              "PREEMPTIONS", "COST", "NOTE")
    for tr in report["trials"]:
        t.add_row(str(tr["id"]), tr["name"], tr["status"], *[_fmt(tr["params"].get(p, "-")) for p in params],
                  *([_fmt(tr["value"]) if tr["value"] is not None else "-"] if by_result else []),
                  *[_fmt(tr["metrics"].get(m, "-")) for m in metrics], _duration(tr["runtime_s"]),
                  runs_label(tr), str(tr["preemptions"]), f"${tr['cost']:.4f}", tr["message"] or "")
    return t


def _best(best: dict[str, Any], obj: dict[str, Any]) -> str:
    """The best trial, flagged when it did not finish: ``lr-3 loss=0.25`` or
    ``lr-2 loss=0.31 (unfinished, step 200)``."""
    v = _fmt(best["value"]) if best.get("value") is not None else "-"
    flag = ""
    if best.get("unfinished"):
        flag = f" (unfinished, step {best['step']:.0f})" if best.get("step") is not None else " (unfinished)"
    return f"{best['name']} {obj['metric']}={v}{flag}"


def _duration(seconds: float) -> str:
    m, sec = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


@sweep_app.command("report")
def report(ctx: typer.Context, name: str = NAME_ARG, json_out: bool = JSON_OPTION,
           markdown: bool = typer.Option(False, "--markdown", help="Print the report as Markdown.")) -> None:
    """The morning report of a sweep, as its sweep.finished notification carries it: the trials
    best first with their parameters, the spend against the cap and what was wasted, the
    preemptions survived, and why each trial that did not succeed stopped.

    Example: gpuorch sweep report tiny-mlp-sweep --markdown > report.md
    """
    from gpuorch.cli.app import fail
    from gpuorch.cli.jobs import _backend, _errors
    from gpuorch.notify.report import render

    if json_out and markdown:
        fail("--json, --markdown: give one of them (--json: the report as data, with its text and Markdown)")
    with _errors():
        found = render([_backend(ctx).sweep(name)])
    if json_out:
        emit_json({"title": found["title"], "sweep": found["sweeps"][0], "text": found["text"],
                   "markdown": found["markdown"]})
    else:
        typer.echo(found["markdown"] if markdown else found["text"])


@sweep_app.command("cancel")
def cancel(ctx: typer.Context, name: str = NAME_ARG, json_out: bool = JSON_OPTION) -> None:
    """Stop the sweep: unfinished trials are cancelled and their instances terminated.

    Example: gpuorch sweep cancel tiny-mlp-sweep
    """
    from gpuorch.cli.jobs import _backend, _errors

    with _errors():
        sweep = _backend(ctx).sweep_cancel(name)
    if json_out:
        emit_json(sweep)
    else:
        typer.echo(f"sweep {sweep['id']} ({sweep['name']}): {sweep['status']}; "
                   f"{sweep['trials_cancelled']} unfinished trials to stop")


# Text, read by gpuorch.bounds.usd: click's float would take nan, inf and 1e308 (a NaN cap was stored as none).
BUDGET_OPTION = typer.Option(None, "--budget", metavar="USD",
                             help="The sweep's new cap in USD (not below what it has spent; at most 1e9).")
DEADLINE_OPTION = typer.Option(None, "--deadline", help="The new deadline: a duration (8h) or a time "
                                                          "(2026-11-28T08:00, UTC unless an offset is given).")


def _budget(text: str | None) -> float | None:
    """``--budget`` as a finite USD amount in range; UserInputError (exit 2) before anything is sent."""
    from gpuorch.bounds import usd

    return None if text is None else usd(text, "--budget")


@sweep_app.command("update")
def update(ctx: typer.Context, name: str = NAME_ARG, budget: str = BUDGET_OPTION, deadline: str = DEADLINE_OPTION,
           json_out: bool = JSON_OPTION) -> None:
    """Raise the sweep's cap or move its deadline; held and queued trials go on under them.

    Example: gpuorch sweep update tiny-mlp-sweep --budget 12 --deadline 8h
    """
    from gpuorch.cli.jobs import _backend, _errors

    with _errors():
        sweep = _backend(ctx).sweep_update(name, _budget(budget), deadline)
    if json_out:
        emit_json(sweep)
    else:
        cap = f"cap ${sweep['max_cost']:.2f}" if sweep["max_cost"] is not None else "no cap"
        when = f", deadline {sweep['deadline']:%Y-%m-%d %H:%M} UTC" if sweep["deadline"] else ""
        typer.echo(f"sweep {sweep['id']} ({sweep['name']}): {sweep['status']}; {cap}{when}")


@sweep_app.command("resume")
def resume(ctx: typer.Context, name: str = NAME_ARG, budget: str = BUDGET_OPTION, deadline: str = DEADLINE_OPTION,
           json_out: bool = JSON_OPTION) -> None:
    """Restart a done or cancelled sweep's unfinished trials from their checkpoints (held ones first).

    Example: gpuorch sweep resume tiny-mlp-sweep
    """
    from gpuorch.cli.jobs import _backend, _errors

    with _errors():
        sweep = _backend(ctx).sweep_resume(name, _budget(budget), deadline)
    if json_out:
        emit_json(sweep)
    else:
        typer.echo(f"sweep {sweep['id']} ({sweep['name']}): {sweep['status']}; {sweep['trials_resumed']} trials "
                   f"resumed; follow it with `gpuorch sweep status {sweep['name']}`")
