"""Shared by the CLI error tests (tests/hardening): bad input is one line, ``error: ...``."""

from __future__ import annotations

from typing import Any


def one_line(out: str | Any) -> str:
    """The single ``error: ...`` line of a CLI's output (a string, or a CliRunner result's
    ``output``); fails the test on more lines, another start, or a traceback."""
    text = out if isinstance(out, str) else out.output
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in text, text
    return lines[0]
