"""The ``gpuorch`` console script and ``python -m gpuorch``.

Importing ``gpuorch.cli`` registers every command (what tests and library users want). The
script sets ``gpuorch._lazy_cli`` first, so that ``gpuorch.cli`` registers nothing on import and
its ``main`` imports only the module of the command named in argv: a cold start of ``gpuorch
offers`` does not import the job, simulation or sweep commands (``docs/benchmarks.md``).

The cyclic garbage collector is off for the start-up, which allocates many objects and frees few
(imports, typer's parameters); ``gpuorch.cli.main`` turns it back on for every command but the
short read-only ones (``NO_GC``).
"""

from __future__ import annotations

import gc

import gpuorch


def main() -> None:
    gc.disable()
    gpuorch._lazy_cli = True
    from gpuorch.cli import main as cli_main

    cli_main()
