"""``gpuorch cost``: what was billed, by job, sweep, provider or day."""

from __future__ import annotations

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.cli.output import WIDE_OPTION, show


@app.command()
def cost(since: str = typer.Option(None, "--since", help="From: 2026-11-28, 2026-11-28T08:00, or back 24h / 7d."),
         by: str = typer.Option("job", "--by", help="Group by job, sweep, provider or day."),
         json_out: bool = JSON_OPTION, wide: bool = WIDE_OPTION) -> None:
    """Costs billed so far (running attempts included), per the providers' billing rules.

    Example: gpuorch cost --since 7d --by day
    """
    from gpuorch.cli.jobs import _store
    from gpuorch.clock import utcnow
    from gpuorch.money.report import GROUPS, cost_report
    from gpuorch.when import parse_instant

    if by not in GROUPS:
        fail(f"--by: {by!r} is not a grouping; use one of {', '.join(GROUPS)}")
    now = utcnow()
    try:
        start = parse_instant(since, now, ago=True) if since else None
    except ValueError as e:
        fail(f"--since: {e}")
    with _store().read() as s:
        report = cost_report(s, start, now, by)
    if json_out:
        emit_json(report)
        return
    from rich.table import Table

    extra = {"job": ["job", "sweep", "status"], "sweep": ["max_cost"], "provider": [], "day": []}[by]
    labels = {"job": "NAME", "max_cost": "CAP"}
    t = Table("JOB" if by == "job" else by.upper(), *[labels.get(e, e.upper()) for e in extra], "ATTEMPTS", "COST")
    for r in report["rows"]:
        cells = [r.get(e) for e in extra]
        t.add_row(str(r["key"]), *["-" if c is None else (f"${c:.2f}" if e == "max_cost" else str(c))
                                   for e, c in zip(extra, cells, strict=True)], str(r["attempts"]), f"${r['cost']:.4f}")
    period = f"since {start:%Y-%m-%d %H:%M} UTC" if start else "all time"
    show(t, wide=wide)
    idle = f", of which ${report['idle']:.4f} warm instances' idle time" if report.get("idle") else ""
    typer.echo(f"total ${report['total']:.4f} ({period}{idle})")
