"""Daemon logs on stderr, for journald: text lines, or one JSON object per line.

A JSON line carries ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, then whatever the
call site attached with ``extra=`` (``job_id`` and ``attempt`` when the line is about a job,
``kind`` for job events), and ``exc`` with the traceback of a logged exception.

When stderr is connected to the journal (``$JOURNAL_STREAM`` names it), each line starts with a
syslog priority prefix (``<4>``) that journald turns into the entry's priority and strips, so
``journalctl -u gpuorch -p warning`` works; text lines then leave the timestamp to journald.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from gpuorch.ops.diskfull import OneLineWhenFull

# Attributes every LogRecord has; anything else came from ``extra=`` and is emitted as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        out.update({k: v for k, v in extra.items() if v is not None})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class _JournalPrefix(logging.Formatter):
    """Wraps a formatter: ``<priority>`` before every line (continuation lines included)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{_PRIORITY.get(record.levelno, 6)}>"
        return "\n".join(prefix + line for line in self.inner.format(record).split("\n"))


def stderr_is_journal(stream: TextIO | None = None, env: dict[str, str] | None = None) -> bool:
    """True if ``stream`` is the journal socket systemd connected (``JOURNAL_STREAM=dev:inode``)."""
    value = (os.environ if env is None else env).get("JOURNAL_STREAM", "")
    try:
        dev, ino = (int(x) for x in value.split(":"))
        st = os.fstat((stream or sys.stderr).fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


def configure_logging(fmt: str = "text", level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send the root logger to ``stream`` (stderr) in ``fmt`` ("text" or "json") at ``level``.

    Replaces handlers this function installed before; returns the new handler.
    """
    stream = stream or sys.stderr
    journal = stderr_is_journal(stream)
    formatter: logging.Formatter
    if fmt == "json":
        formatter = JsonFormatter()
    else:
        formatter = logging.Formatter(("" if journal else "%(asctime)s ") + "%(levelname)s %(name)s: %(message)s")
    if journal:
        formatter = _JournalPrefix(formatter)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(OneLineWhenFull())  # a full disk: one line a minute, not a traceback per write
    handler._gpuorch = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_gpuorch", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
