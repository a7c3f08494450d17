"""Output conventions every command shares: tables that never cut a value, NO_COLOR, and the
one-line "no daemon is running" warning.

- On a terminal a table is drawn by rich, with cells folded onto the next line instead of cut
  with an ellipsis; ``--wide`` (or stdout that is not a terminal: a pipe, a file) prints plain
  text columns aligned with two spaces and every value in full, so ``grep``/``awk`` see the
  exact numbers.
- Colour: rich honours ``NO_COLOR`` (https://no-color.org) and turns colour off when stdout is
  not a terminal; the plain text path never prints escape codes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

WIDE_OPTION = typer.Option(False, "--wide", help="Plain columns with every value in full (the default when piped).")


def plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned with two spaces, values in full; the last column is not padded."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = []
    for cells in [list(headers), *[list(r) for r in rows]]:
        line = "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths[:-1], strict=True))
        lines.append(f"{line}  {cells[-1]}" if line else cells[-1])
    return "\n".join(x.rstrip() for x in lines) + "\n"


def show(table: Any, *, wide: bool = False) -> None:
    """Print a ``rich.table.Table``: plain columns when ``wide`` or stdout is not a terminal,
    else rich's drawing with long cells folded, never cut."""
    if wide or not sys.stdout.isatty():
        if table.title:
            sys.stdout.write(f"{table.title}\n")
        headers = [str(c.header) for c in table.columns]
        cols = [[str(cell) for cell in c.cells] for c in table.columns]
        sys.stdout.write(plain(headers, [list(r) for r in zip(*cols, strict=True)]))
        return
    from rich.console import Console

    for col in table.columns:
        col.overflow = "fold"  # wrap a long value onto the next line; never "$0.01…"
        col.no_wrap = False
    Console(no_color=True if os.environ.get("NO_COLOR") else None).print(table)


def daemon_warning(backend: Any) -> None:
    """One line on stderr when no daemon has finished a pass lately on the store ``backend``
    reads (JobService or the API client). Reading the heartbeat must never fail the command."""
    from gpuorch.errors import GpuorchError
    from gpuorch.store.heartbeat import warning

    try:
        line = warning(backend.daemon())
    except (GpuorchError, OSError):  # an older server without /v1/daemon, a store being migrated
        return
    if line:
        typer.echo(f"warning: {line}", err=True)
