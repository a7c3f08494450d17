"""The ``gpuorch`` command line. It writes intent to the store and never calls a cloud API;
the daemon acts. Command modules register themselves on the shared typer app when imported."""

from __future__ import annotations

import importlib

from .app import app

COMMAND_MODULES = ("jobs", "ops", "serve", "planning", "simulate", "catalog", "costs", "sweeps")


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise


def main() -> None:
    _register()
    app()


_register()
