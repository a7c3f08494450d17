"""``gpuorch debug preempt``: reclaim a job's instance by hand, to try checkpoint and resume.

Only providers with a simulated market can do it (the ``SupportsPreemptionInjection``
capability: ``local`` and ``sim``); a cloud's reclaims are the cloud's. The command does what
the cloud would: it announces the reclaim to the instance (the agent sees the notice and takes
a final checkpoint) and ends the instance at the deadline. The daemon then sees a preemption as
from a real market and relaunches the job from its checkpoint.
"""

from __future__ import annotations

import typer

from gpuorch.cli.app import JSON_OPTION, app, cli_config, emit_json, fail, guard

debug_app = typer.Typer(help="Try gpuorch by hand on the local and sim providers (simulated reclaims).",
                        no_args_is_help=True)
app.add_typer(debug_app, name="debug")


@debug_app.command("preempt")
def preempt(job: str = typer.Argument(..., help="Job id, or the name of the newest job with that name."),
            notice: str = typer.Option("30s", "--notice", metavar="DURATION",
                                       help="Warning before the reclaim, as a spot market gives: 30s, 2m; 0 for none."),
            json_out: bool = JSON_OPTION) -> None:
    """Reclaim the instance of JOB's running attempt after --notice, as a spot market would.

    Example: gpuorch debug preempt train --notice 30s
    """
    from gpuorch.jobs import intent as jobs
    from gpuorch.provider.port import SupportsPreemptionInjection
    from gpuorch.registry import load_provider
    from gpuorch.store import Store
    from gpuorch.units import parse_duration_s

    try:
        notice_s = parse_duration_s(notice)
    except ValueError as e:
        fail(f"--notice: {e}")
    cfg = cli_config()
    store = Store(cfg.url)
    try:
        with guard(), store.read() as s:  # an unknown job: one line, exit 3
            j = jobs.find_job(s, job)
            live = [a for a in jobs.attempts_of(s, j.id or 0) if a.status.live and a.instance_id]
    finally:
        store.close()
    if not live:
        fail(f"job: {j.name} (job {j.id}) has no running instance to reclaim ({j.status.value}); "
             "wait until `gpuorch status` shows it running")
    a = live[-1]
    if a.provider not in cfg.providers:
        fail(f"job: attempt {a.number} runs on provider {a.provider}, which this configuration does not enable")
    with guard():
        provider = load_provider(a.provider, cfg.providers[a.provider] or {}, cfg.home)
    try:
        if not isinstance(provider, SupportsPreemptionInjection):
            fail(f"job: attempt {a.number} runs on {a.provider}, which cannot simulate a reclaim; "
                 "only providers with a simulated market (local, sim) can")
        with guard():
            provider.inject_preemption(a.instance_id or "", notice_s)
    finally:
        provider.close()
    out = {"job": j.id, "name": j.name, "attempt": a.number, "provider": a.provider, "instance_id": a.instance_id,
           "notice_s": notice_s}
    if json_out:
        emit_json(out)
    else:
        when = f"in {notice_s:g}s" if notice_s else "now, without notice"
        typer.echo(f"job {j.id} ({j.name}) attempt {a.number}: {a.provider} instance {a.instance_id} is reclaimed "
                   f"{when}; follow the recovery with `gpuorch status {j.id}`")
