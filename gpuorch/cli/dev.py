"""``gpuorch dev``, ``gpuorch ssh`` and ``gpuorch port``: interactive dev boxes (docs/dev-boxes.md).

``dev`` writes intent only (a job of kind ``dev``, or a held box queued again); the daemon places
and launches it. ``ssh`` and ``port`` connect to the running instance themselves, with the
daemon's key for the job and its pinned host keys, so they run on the control host (this host's
store and configuration; not through ``--server``).
"""

from __future__ import annotations

import os
from typing import Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, cli_config, emit_json, fail

NAME_ARG = typer.Argument(..., help="The dev box (or job) name, or a job id.")


def _no_server(ctx: typer.Context, command: str) -> None:
    target = ctx.obj
    if target is not None and target.server:
        fail(f"{command}: --server: connects from the control host only (its keys and known_hosts); run it there "
             "without --server")


@app.command("dev")
def dev(ctx: typer.Context, name: str = typer.Argument(..., help="The box's name (1-63 lowercase letters, digits, -)."),
        gpu: str = typer.Option(None, "--gpu", help="GPU spec like A100:80GB:1 or L4:1."),
        model: str = typer.Option(None, "--model", help="Size the GPU for a model instead: 8B, 70B or a preset."),
        method: str = typer.Option("qlora", "--method", help="With --model: full, lora, qlora or inference."),
        image: str = typer.Option(None, "--image", help="Container image the box's shells and jobs use."),
        volume: str = typer.Option(None, "--volume", help="Persistent volume SIZE[:MOUNT], e.g. 100GB:/data; kept "
                                   "when the box stops idle."),
        spot: bool = typer.Option(False, "--spot", help="Run on spot (cheaper; can be reclaimed at any time)."),
        idle_stop: str = typer.Option(None, "--idle-stop", help="Stop when idle this long: 30m (no SSH session, "
                                      "every GPU below --idle-gpu-util)."),
        idle_gpu_util: float = typer.Option(5.0, "--idle-gpu-util", min=0, max=100,
                                            help="Percent: a GPU below it counts as idle."),
        max_duration: str = typer.Option(None, "--max-duration", help="End the box after this much running: 8h."),
        provider: list[str] = typer.Option(None, "--provider", help="Only these providers (repeatable)."),
        env: list[str] = typer.Option(None, "--env", help="KEY=VALUE in the box's environment (repeatable), "
                                      "checked as a job spec's env is: HF_HOME=/data/hf."),
        json_out: bool = JSON_OPTION) -> None:
    """Start an interactive dev box on the cheapest offer that fits (on-demand unless --spot).

    Run again for a box that idle stop stopped: it starts again with the same volume.

    Example: gpuorch dev nb --gpu L4:1 --volume 100GB --idle-stop 30m --env HF_HOME=/data/hf && gpuorch ssh nb
    """
    from gpuorch.cli.jobs import _errors, _local
    from gpuorch.clock import utcnow
    from gpuorch.devbox.boxes import SPOT_WARNING, BoxRequest, start

    _no_server(ctx, "gpuorch dev")
    request = BoxRequest(name=name, gpu=gpu, model=model, method=method, image=image, volume=volume, spot=spot,
                         idle_stop=idle_stop, idle_gpu_util=idle_gpu_util, max_duration=max_duration,
                         providers=tuple(provider or ()), env=_env(env))
    with _errors():
        answer = start(_local(), request, utcnow())
    new = answer["started"] == "new"
    kept = None if new or not env else (f"--env: box {answer['id']} keeps the environment it was created with; "
                                        f"for a new one, gpuorch cancel {answer['name']} first")
    warnings = [w for w in (SPOT_WARNING if spot and new else None, kept, answer.get("warning")) if w]
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    if json_out:
        emit_json({**answer, "warnings": warnings})
        return
    verb = {"new": "queued", "again": "queued again (its volume kept)", "running": "is already " + answer["status"]}
    typer.echo(f"dev box {answer['id']} ({answer['name']}) {verb[answer['started']]}; "
               f"`gpuorch ssh {answer['name']}` once `gpuorch status` says running")


def _env(items: list[str] | None) -> dict[str, str]:
    """``--env KEY=VALUE`` (repeatable) as the spec's ``env``, each name and value checked as a job
    spec's are (``jobs.validate``); a bad one fails here, one line naming ``--env``, nothing stored."""
    from gpuorch.jobs import validate as v_

    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"gpuorch dev: --env {item!r}: expected KEY=VALUE, like --env HF_HOME=/data/hf")
        if key in out:
            fail(f"gpuorch dev: --env {key}: given twice; keep one")
        try:
            out[v_.env_name(key)] = v_.env_value(value)
        except ValueError as e:
            fail(f"gpuorch dev: --env {item!r}: {e}")
    if len(out) > v_.MAX_ENV:
        fail(f"gpuorch dev: --env: {len(out)} variables, at most {v_.MAX_ENV}; put the rest in a file the box reads")
    return out


@app.command("ssh", context_settings={"allow_interspersed_args": False})
def ssh(ctx: typer.Context, name: str = NAME_ARG,
        command: list[str] = typer.Argument(None, help="Command to run (after --); none: a shell."),
        host: bool = typer.Option(False, "--host", help="On the instance itself, not in the job's container "
                                  "(a job with an image); before NAME.")) -> None:
    """A shell on a running dev box or job, or run COMMAND there and exit with its exit code.

    Uses the daemon's key for the job and verifies the host key; no ~/.ssh/config needed. A job
    with an image: in its container (--host: on the instance).

    Example: gpuorch ssh nb; gpuorch ssh nb -- nvidia-smi; gpuorch ssh --host nb
    """
    from gpuorch.cli.jobs import _errors
    from gpuorch.devbox import sessions
    from gpuorch.devbox.remote import endpoint

    _no_server(ctx, "gpuorch ssh")
    command = list(command or [])
    if command[:1] == ["--"]:  # click keeps the separator once an argument came before it
        command = command[1:]
    with _errors():
        _, ep = endpoint(cli_config(), name, container="never" if host else "require")
        if command:
            code = sessions.run(ep, command)
        else:
            argv = sessions.interactive_argv(ep)
            code = -1
    if command:
        raise typer.Exit(code)
    try:
        os.execvp(argv[0], argv)  # a list: no shell parses it here
    except OSError as e:
        fail(f"gpuorch ssh: cannot run {argv[0]!r} ({e.strerror}); install the OpenSSH client, or run a command "
             "with gpuorch ssh NAME -- CMD", 1)


@app.command("port")
def port(ctx: typer.Context, name: str = NAME_ARG,
         remote_port: int = typer.Argument(..., min=1, max=65535, help="The port on the box (8888 for Jupyter)."),
         local: int = typer.Option(None, "--local", min=0, max=65535,
                                   help="Local port on 127.0.0.1 (default: the same as the box's; 0: any free)."),
         json_out: bool = JSON_OPTION) -> None:
    """Forward a port of a running dev box or job to 127.0.0.1 and print its URL; Ctrl-C stops.

    Example: gpuorch port nb 8888
    """
    from gpuorch.cli.jobs import _errors
    from gpuorch.devbox.forward import Forward
    from gpuorch.devbox.remote import endpoint

    _no_server(ctx, "gpuorch port")
    with _errors():
        _, ep = endpoint(cli_config(), name, "gpuorch port")
        fwd = Forward.open(ep, remote_port, remote_port if local is None else local)
    with fwd:
        info: dict[str, Any] = {"url": fwd.url, "local_port": fwd.local_port, "remote_port": remote_port}
        if json_out:
            emit_json(info)
        else:
            typer.echo(f"forwarding {fwd.url} -> {name}:{remote_port} (Ctrl-C stops)")
        try:
            fwd.serve()
        except KeyboardInterrupt:
            pass
