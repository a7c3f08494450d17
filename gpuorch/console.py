"""The ``gpuorch`` console script and ``python -m gpuorch``.

Importing ``gpuorch.cli`` registers every command (what tests and library users want). The
script sets ``gpuorch._lazy_cli`` first, so that ``gpuorch.cli`` registers nothing on import and
its ``main`` imports only the module of the command named in argv: a cold start of ``gpuorch
offers`` does not import the job, simulation or sweep commands (``docs/benchmarks.md``).
"""

from __future__ import annotations

import gpuorch


def main() -> None:
    gpuorch._lazy_cli = True
    from gpuorch.cli import main as cli_main

    cli_main()
