"""The ``gpuorch`` command line. It writes intent to the store and never calls a cloud API;
the daemon acts. Command modules register themselves on the shared typer app when imported.

Importing this package registers every command, so ``from gpuorch.cli import app`` (tests,
library users) gets them all. The console script (``gpuorch.console``) imports it with
``gpuorch._lazy_cli`` set instead: ``main`` then imports only the module that defines the command
named in argv (``COMMANDS``), so a cold start pays for that module alone.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Sequence

import typer

import gpuorch
from gpuorch.cli.app import app

COMMAND_MODULES = ("jobs", "ops", "serve", "estimate", "planning", "simulate", "catalog", "costs", "sweeps", "debug",
                   "dev", "volumes")

# The module that defines each top-level command or group; tests/cli/test_lazy_cli.py checks it
# against what the modules register. A command missing here still works: main imports them all.
COMMANDS = {
    "submit": "jobs", "status": "jobs", "cancel": "jobs", "logs": "jobs", "events": "jobs", "daemon": "jobs",
    "doctor": "ops", "install-service": "ops",
    "serve": "serve",
    "estimate": "estimate", "offers": "planning", "plan": "planning",
    "simulate": "simulate",
    "catalog": "catalog",
    "cost": "costs", "volume": "volumes",
    "sweep": "sweeps",
    "debug": "debug",
    "dev": "dev", "ssh": "dev", "port": "dev",
}

# The global options (app.py) that take a value, so the command is found after them.
_VALUE_OPTIONS = ("--config", "--server", "--token")

# Short read-only commands that run with the cyclic garbage collector off (the console script
# turns it off for the start-up): what they build lives until the process ends anyway, and the
# collector's passes over the freshly imported modules cost ~5 % of a cold `offers`. Every other
# command, the daemon's and other long-running ones, gets it back before it runs.
NO_GC = frozenset({"offers", "status", "estimate"})


def _import(name: str) -> None:
    try:
        importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise


def _register() -> None:
    for name in COMMAND_MODULES:
        _import(name)


def command_name(args: Sequence[str]) -> str | None:
    """The top-level command ``args`` name after the global options, or None (no command,
    ``--help`` or another option before it)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _VALUE_OPTIONS:
            i += 2
        elif arg.startswith(tuple(f"{o}=" for o in _VALUE_OPTIONS)):
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def command_module(args: Sequence[str]) -> str | None:
    """The module defining the command ``args`` invoke, or None when every command is needed
    (no command, ``--help`` or another option before it, an unknown command)."""
    name = command_name(args)
    return COMMANDS.get(name) if name is not None else None


def main() -> None:
    from gpuorch.cli.app import guard

    name = command_name(sys.argv[1:])
    module = COMMANDS.get(name) if name is not None else None
    if module is None:
        _register()
    else:
        _import(module)
    if name not in NO_GC:
        gc.enable()
    try:
        with guard():  # whatever a command did not catch: one line, never a traceback
            app()
    except typer.Exit as e:  # guard's own exit, outside click's handling
        sys.exit(e.exit_code)


if not gpuorch._lazy_cli:
    _register()
