"""``gpuorch simulate policy``: replay the spot policies over real availability traces.

The simulator needs numpy; it is imported when the command runs, so that the rest of the
CLI works without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuorch.bounds import MAX_HOURS, MAX_USD
from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.policy.model import Job

if TYPE_CHECKING:
    from rich.table import Table

    from gpuorch.policy.evaluate import Report, Stats
    from gpuorch.policy.traces import Trace

simulate_app = typer.Typer(
    help="Replay deadline-aware spot policies over spot-availability traces.", no_args_is_help=True
)
app.add_typer(simulate_app, name="simulate")

TRACE_HELP = "ZONE=FILE, a trace FILE (zone = file stem) or a DIRECTORY of *.json traces; repeatable."


def parse_trace_args(values: list[str]) -> list[Trace]:
    """Resolve every ``--trace`` value to loaded traces; ``fail`` on the first bad one."""
    from gpuorch.policy.traces import TraceError, load_trace, trace_files

    traces: list[Trace] = []
    for value in values:
        zone, sep, path_text = value.partition("=")
        if not sep:
            zone, path_text = "", value
        elif not zone or not path_text:
            fail(f"--trace {value!r}: write ZONE=FILE, e.g. --trace us-east-1a=traces/us-east-1a.json")
        path = Path(path_text)
        if path.is_dir():
            if zone:
                fail(f"--trace {value}: a directory takes no ZONE= (its zones are the file stems)")
            files = trace_files(path)
            if not files:
                fail(f"--trace {value}: the directory holds no *.json trace files")
        elif path.is_file():
            files = [path]
        else:
            fail(f"--trace {value}: no such file or directory {path}; give ZONE=FILE or a directory of *.json")
        for file in files:
            try:
                traces.append(load_trace(file, zone or None))
            except TraceError as exc:
                fail(f"--trace: {exc}")
    zones = [t.zone for t in traces]
    duplicates = sorted({z for z in zones if zones.count(z) > 1})
    if duplicates:
        fail(f"--trace: zone {duplicates[0]} is given twice; name each trace once (ZONE=FILE)")
    return traces


def build_job(
    job_hours: float, deadline_hours: float, changeover_hours: float, od_price: float, spot_price: float, gap_s: int
) -> Job:
    """Validate the numbers in the order a user reads them; ``fail`` names the flag to fix."""
    for flag, value in (("--job-hours", job_hours), ("--deadline-hours", deadline_hours)):
        if value <= 0:
            fail(f"{flag} must be a positive number of hours, got {value:g}")
    for flag, value in (
        ("--changeover-hours", changeover_hours),
        ("--on-demand-price", od_price),
        ("--spot-price", spot_price),
    ):
        if value < 0:
            fail(f"{flag} must not be negative, got {value:g}")
    job = Job.from_hours(
        work_h=job_hours,
        deadline_h=deadline_hours,
        changeover_h=changeover_hours,
        gap_s=gap_s,
        on_demand_price=od_price,
        spot_price=spot_price,
    )
    if not job.feasible():
        need_h = job.ticks_to_cover(job.work_s + job.changeover_s) * gap_s / 3600
        problem = (
            f"is shorter than --job-hours {job_hours:g}"
            if deadline_hours < job_hours
            else "cannot fit the job plus one changeover"
        )
        fail(f"--deadline-hours {deadline_hours:g} {problem}; give at least {need_h:.2f} ({gap_s} s ticks)")
    return job


@simulate_app.command("policy")
def policy(
    trace: list[str] = typer.Option(..., "--trace", help=TRACE_HELP),
    job_hours: float = typer.Option(..., "--job-hours", min=0.001, max=MAX_HOURS,
                                  help="Hours of work the job needs."),
    deadline_hours: float = typer.Option(..., "--deadline-hours", min=0.001, max=MAX_HOURS,
                                  help="Hours from start to deadline."),
    changeover_hours: float = typer.Option(..., "--changeover-hours", min=0, max=MAX_HOURS,
                                  help="Hours lost per (re)start or move."),
    on_demand_price: float = typer.Option(..., "--on-demand-price", min=0, max=MAX_USD,
                                  help="On-demand $/hour."),
    spot_price: float = typer.Option(..., "--spot-price", min=0, max=MAX_USD,
                                  help="Spot $/hour."),
    windows: int = typer.Option(20, "--windows", min=1, max=1_000_000,
                                  help="Random windows (job start times) per zone."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1,
                                  help="Seed for the window start times."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Mean and P90 cost and deadline misses of each policy, single- and multi-region.

    Example: gpuorch simulate policy --trace traces/ --job-hours 6 --deadline-hours 10
    --changeover-hours 0.2 --on-demand-price 4.1 --spot-price 1.3
    """
    try:
        from gpuorch.policy.evaluate import evaluate
    except ModuleNotFoundError as exc:
        if exc.name != "numpy":
            raise
        fail("simulate policy needs numpy; install it with: pip install numpy")
    if windows < 1:
        fail(f"--windows must be at least 1, got {windows}")
    traces = parse_trace_args(trace)
    gaps = sorted({t.gap_s for t in traces})
    if len(gaps) > 1:
        fail(f"--trace: traces mix gap_seconds {gaps}; give traces sampled at the same interval")
    job = build_job(job_hours, deadline_hours, changeover_hours, on_demand_price, spot_price, gaps[0])
    shortest = min(traces, key=len)
    if len(shortest) < job.deadline_ticks:
        fail(
            f"--trace {shortest.zone} covers {len(shortest) * job.gap_s / 3600:.1f} h, less than "
            f"--deadline-hours {deadline_hours:g}; use a longer trace or a shorter deadline"
        )
    report = evaluate(traces, job, windows, seed)
    if json_out:
        emit_json(report.to_json())
    else:
        _print(report, job)


def _stats_table(title: str, stats: dict[str, Stats]) -> Table:
    from rich.table import Table

    table = Table(title=title)
    for column in ("policy", "mean $", "P90 $", "missed", "jobs"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, s in stats.items():
        table.add_row(name, f"{s.mean_cost:.2f}", f"{s.p90_cost:.2f}", str(s.missed), str(s.jobs))
    return table


def _print(report: Report, job: Job) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpuorch.cli.output import show

    console = Console(soft_wrap=True)
    console.print(
        f"{job.work_s / 3600:g} h job, deadline {job.deadline_s / 3600:g} h, changeover "
        f"{job.changeover_s / 3600:g} h, {report.windows} windows per zone"
    )
    show(_stats_table("Single-region, all zones", report.policies))
    if len(report.per_zone) > 1:
        table = Table(title="Single-region mean $ per zone")
        table.add_column("zone", no_wrap=True)
        for name in report.policies:
            table.add_column(name, justify="right")
        for zone, stats in report.per_zone.items():
            table.add_row(zone, *(f"{stats[name].mean_cost:.2f}" for name in report.policies))
        show(table)
    if report.multi_region is not None:
        show(_stats_table("Multi-region, every zone", report.multi_region))
