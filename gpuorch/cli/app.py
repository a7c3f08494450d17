"""The typer application object and the output helpers every command module shares."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

app = typer.Typer(
    name="gpuorch",
    help="Multi-cloud GPU orchestration: cheapest fitting GPU, checkpoint on preemption, hard dollar caps.\n\n"
         "Example: gpuorch submit job.yaml && gpuorch status",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON.")

if TYPE_CHECKING:
    from gpuorch.ops.config import DaemonConfig

_config_path: Path | None = None  # the global --config of this invocation


def config_path() -> Path | None:
    return _config_path


def cli_config() -> DaemonConfig:
    """The effective configuration for this command (sources: ``gpuorch.ops.config_sources``);
    a bad one ends the command with one line and exit code 2."""
    from gpuorch.errors import UserInputError
    from gpuorch.ops.config_sources import load_config

    try:
        return load_config(_config_path)
    except UserInputError as e:
        fail(str(e))


def cli_store_location() -> tuple[Path, str]:
    """``(home, database URL)`` of this command's configuration. With no configuration file and
    no other ``GPUORCH_*`` variable, read without YAML or pydantic (``store_location``);
    otherwise from ``cli_config()``, which also reports a bad configuration."""
    from gpuorch.ops.config_sources import store_location

    quick = store_location(_config_path)
    if quick is not None:
        return quick
    cfg = cli_config()
    return cfg.home, cfg.url


@dataclass
class Target:
    """Where job commands go: this host's store, or the HTTP API at ``server`` (ctx.obj)."""

    server: str | None = None
    token: str | None = None


def _version(value: bool) -> None:
    if value:
        from gpuorch import __version__

        typer.echo(f"gpuorch {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", is_eager=True, callback=lambda v: _version(v),
                                 help="Print the version and exit."),
    config: Path = typer.Option(None, "--config", envvar="GPUORCH_CONFIG", metavar="FILE",
                                help="Configuration file, read over /etc/gpuorch and ~/.config/gpuorch."),
    server: str = typer.Option(None, "--server", envvar="GPUORCH_SERVER", metavar="URL",
                               help="Send submit, status, cancel, events, logs and sweep to this gpuorch API."),
    token: str = typer.Option(None, "--token", envvar="GPUORCH_API_TOKEN", show_default=False,
                              help="The API token for --server (prefer the variable: arguments show in ps)."),
) -> None:
    """Multi-cloud GPU orchestration: cheapest fitting GPU, checkpoint on preemption, hard dollar caps.

    Example: gpuorch submit job.yaml && gpuorch status
    """
    global _config_path
    _config_path = config
    ctx.obj = Target(server, token)


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr naming the field and the fix; nothing else."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)


# Exit codes (README "Exit codes"): what a script may branch on.
EXIT_RUNTIME, EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_REFUSED = 1, 2, 3, 4


def exit_code(e: BaseException) -> int:
    """2 bad input, 3 not found, 4 refused (budget, authentication), 1 anything else."""
    from gpuorch.errors import Refused, UnknownJob, UnknownSweep, UserInputError

    status = getattr(e, "status", None)  # the API client's RemoteRefused carries the HTTP status
    if isinstance(e, UnknownJob | UnknownSweep) or status == 404:
        return EXIT_NOT_FOUND
    if isinstance(e, Refused) or status in (401, 403):
        return EXIT_REFUSED
    return EXIT_BAD_INPUT if isinstance(e, UserInputError) else EXIT_RUNTIME


@contextmanager
def guard() -> Iterator[None]:
    """Every error as one line on stderr and its exit code (``exit_code``); never a traceback,
    unless GPUORCH_DEBUG is set."""
    import os

    from gpuorch.errors import GpuorchError

    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
        raise
    except GpuorchError as e:
        fail(str(e), exit_code(e))
    except Exception as e:
        if os.environ.get("GPUORCH_DEBUG"):
            raise
        from gpuorch.errors import runtime_line

        fail(runtime_line(e), EXIT_RUNTIME)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")  # one write: json.dump writes per token
