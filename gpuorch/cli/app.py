"""The typer application object and the output helpers every command module shares."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer.core import TyperGroup


class OneLineErrors(TyperGroup):
    """Usage errors (a bad or missing option, an unknown command) as one line on stderr naming
    the option and where the fix is, exit code 2, like every other error of the CLI; typer would
    draw a box of several lines around them."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        call = dict(args=args, prog_name=prog_name, complete_var=complete_var, windows_expand_args=windows_expand_args,
                    standalone_mode=False, **extra)
        if not standalone_mode:
            return super().main(**call)
        # typer's click (vendored or not) by their place in BadParameter's ancestry, not its module path
        ancestry: dict[str, Any] = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
        click_error, usage_error = ancestry["ClickException"], ancestry["UsageError"]
        try:
            code = super().main(**call)
        except usage_error as e:
            if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:  # bare `gpuorch`: its help
                typer.echo(e.ctx.get_help())
                sys.exit(0)
            where = e.ctx.command_path if e.ctx is not None else "gpuorch"
            message = _not_finite(e, args) or " ".join(e.format_message().split())
            typer.echo(f"error: {message.rstrip('.')}; see '{where} --help'", err=True)
            sys.exit(e.exit_code)
        except click_error as e:
            typer.echo(f"error: {' '.join(e.format_message().split())}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        # Without standalone mode, typer returns an Exit's code (commands return None).
        sys.exit(code if isinstance(code, int) else 0)


def _not_finite(e: Exception, args: Sequence[str] | None) -> str | None:
    """The message for a number option given NaN or an infinity, which typer's range check reports
    as out of range ("should be less than or equal to 100"): that it is not a finite number. The
    option's last value counts, as for click."""
    opts = getattr(getattr(e, "param", None), "opts", None) or ()
    given = list(sys.argv[1:] if args is None else args)
    found = None
    for i, arg in enumerate(given):
        name, eq, value = arg.partition("=")
        if name in opts:
            found = name, value if eq else (given[i + 1] if i + 1 < len(given) else "")
    if found is None:
        return None
    try:
        if math.isfinite(float(found[1])):
            return None
    except ValueError:
        return None
    return f"Invalid value for '{found[0]}': {found[1]} is not a finite number; write a number"


app = typer.Typer(
    cls=OneLineErrors,
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
_config: list[DaemonConfig] = []  # this invocation's configuration, once read (cli_config)


def config_path() -> Path | None:
    return _config_path


def cli_config() -> DaemonConfig:
    """The effective configuration for this command (sources: ``gpuorch.ops.config_sources``),
    read once per invocation; a bad one ends the command with one line and exit code 2. With no
    configuration file and no ``GPUORCH_*`` option it is the defaults, built without YAML or
    validation (``store_location``, ``ops.config.defaults``): ``offers`` starts faster."""
    if not _config:
        _config.append(_read_config())
    return _config[0]


def _read_config() -> DaemonConfig:
    import os

    from gpuorch.errors import UserInputError
    from gpuorch.ops.config_sources import load_config, store_location

    quick = store_location(_config_path)
    if quick is not None and not os.environ.get("GPUORCH_DATABASE_URL"):  # a URL given is checked by load
        from gpuorch.ops.config import defaults

        return defaults(quick[0])
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
    _config.clear()  # read again by this invocation (tests run many in one process)
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
