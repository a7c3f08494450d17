"""Control-host commands: doctor, install-service."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuorch.cli.app import JSON_OPTION, app, config_path, emit_json, fail

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


@app.command()
def doctor(json_out: bool = JSON_OPTION) -> None:
    """Check configuration, database, providers and their credentials, checkpoint stores, SSH keys
    and the metrics port; each problem with its fix. Exit code 1 when something is wrong.

    Example: gpuorch doctor --json
    """
    from gpuorch.doctor import failed, run, summary

    findings = run(config_path())
    bad = failed(findings)
    if json_out:
        emit_json({"ok": not bad, "summary": summary(findings), "findings": [f.to_dict() for f in findings]})
    else:
        width = max((len(f.check) for f in findings), default=0)
        for f in findings:
            typer.echo(f"{_MARK[f.status]}  {f.check:<{width}}  {f.message}")
            if f.fix and f.status != "ok":
                typer.echo(f"      {'':<{width}}  fix: {f.fix}")
        typer.echo(f"\n{summary(findings)}")
    if bad:
        raise typer.Exit(1)


@app.command("install-service")
def install_service(
    unit_dir: Path = typer.Option(Path("/etc/systemd/system"), "--unit-dir", help="Where to write gpuorch.service."),
    user: str = typer.Option("gpuorch", "--user", help="The dedicated user the daemon runs as."),
    stdout: bool = typer.Option(False, "--stdout", help="Print the unit instead of writing it."),
) -> None:
    """Write the systemd unit for this installation and print the commands that finish the setup.

    Example: sudo gpuorch install-service --user gpuorch
    """
    from gpuorch.ops.systemd_unit import install_commands, render_unit, this_executable

    exec_start = this_executable()
    unit = render_unit(exec_start, user)
    if stdout:
        typer.echo(unit, nl=False)
        return
    if exec_start.startswith(("/home/", "/root/")):
        typer.echo(f"warning: {exec_start} is under a home directory, which ProtectHome=true hides from the "
                   "service; install gpuorch under /opt (e.g. python3 -m venv /opt/gpuorch/.venv)", err=True)
    path = unit_dir / "gpuorch.service"
    try:
        unit_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(unit)
    except PermissionError:
        fail(f"--unit-dir: cannot write {path}; run with sudo, or pass --unit-dir DIR or --stdout")
    typer.echo(f"wrote {path}\nnow, as root:")
    for line in install_commands(exec_start, user):
        typer.echo(f"  {line}")
