"""How much a job may write back to the daemon: its result (``$GPUORCH_RESULT_FILE``) and its
metrics lines (``$GPUORCH_METRICS_FILE``), bounded in bytes and in nesting depth.

A result travels in ``status.json``, is stored in the job's row and is shown by ``status`` and the
dashboard with every other job, so it must stay small: like the termination message Kubernetes
keeps for a container (4096 bytes each, 12 KiB a pod), it is a summary, not an output channel.
64 KiB holds a summary of thousands of numbers; what is larger belongs in the checkpoint store or
on a volume. Nesting is bounded because JSON parsers recurse: 100,000 nested lists crash
Python's ``json`` (RecursionError), and no summary needs 32 levels.

The agent enforces these where it reads the files, and the daemon again where it stores what the
agent sent (it never trusts an agent): what is over a limit is dropped, with a line saying why,
and never fails the job. Stdlib only, and Python 3.8: the module runs on instances too.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

RESULT_MAX_BYTES = 64 * 1024  # result.json, and the result as the daemon stores it (compact JSON)
MAX_DEPTH = 32  # nesting of a result or a metrics line ([[1]] is 2)
METRICS_LINE_MAX_BYTES = 16 * 1024  # one metrics line: 64 metric names of 200-character values fit
STATUS_MAX_BYTES = 4 * 1024 * 1024  # status.json as the daemon reads it: a result plus 100,000 checkpoint names
STATUS_MAX_DEPTH = MAX_DEPTH + 2  # the result sits inside the status object
ADVICE = "write large outputs to the checkpoint store or a volume"

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def size_text(n: int) -> str:
    """Bytes as people read them: ``512 bytes``, ``64 KiB``, ``50 MiB``, ``1.5 GiB``."""
    if n < 1024:
        return f"{n} bytes"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"  # not reached


def depth_over(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests deeper than ``limit`` (arrays and objects; brackets inside strings
    do not count). Linear and without recursion, so it is safe before ``json.loads``."""
    depth = 0
    for c in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if c in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _finite(text: str) -> Optional[float]:
    value = float(text)
    return value if math.isfinite(value) else None


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses (ValueError) nesting deeper than ``max_depth`` before parsing,
    and reads NaN, Infinity and numbers too large for a float as null: every number finite."""
    if depth_over(text, max_depth):
        raise ValueError(f"nests deeper than {max_depth} levels")
    return json.loads(text, parse_constant=lambda _name: None, parse_float=_finite)


def dropped(why: str, message: str, **data: Any) -> Dict[str, Any]:
    """What stands for a result that was not kept: ``{"dropped": why, "message": ..., ...}``."""
    out: Dict[str, Any] = {"dropped": why, "message": message}
    out.update(data)
    return out


def _too_large(name: str, size: int) -> Dict[str, Any]:
    most = size_text(RESULT_MAX_BYTES)
    shown = size_text(size) if size_text(size) != most else f"{size:,} bytes"  # not "64 KiB, over the 64 KiB"
    return dropped("size", f"{name} is {shown}, over the {most} limit; {ADVICE}",
                   bytes=size, limit_bytes=RESULT_MAX_BYTES)


def _too_deep(name: str) -> Dict[str, Any]:
    return dropped("depth", f"{name} nests deeper than {MAX_DEPTH} levels, the limit; flatten it or {ADVICE}",
                   limit_depth=MAX_DEPTH)


def read_result(path: Path) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The job's result file as ``(result, why it was dropped)``: ``(None, None)`` when there is
    none; the parsed object (a non-object as ``{"value": ...}``) and None when it is within the
    limits; else a ``dropped`` record and its message. Never reads more than the limit, never
    raises for what the file holds."""
    name = path.name
    try:
        with open(path, "rb") as f:
            size = _size(f)
            if size > RESULT_MAX_BYTES:
                record = _too_large(name, size)
                return record, record["message"]
            data = f.read(RESULT_MAX_BYTES + 1)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        record = dropped("unreadable", f"{name} cannot be read ({e.strerror or e}); write a regular file")
        return record, record["message"]
    if len(data) > RESULT_MAX_BYTES:  # it grew after the stat
        record = _too_large(name, len(data))
        return record, record["message"]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        record = dropped("invalid", f"{name} is not UTF-8 text; write JSON")
        return record, record["message"]
    if depth_over(text, MAX_DEPTH):
        record = _too_deep(name)
        return record, record["message"]
    try:
        value = loads(text)
    except ValueError as e:
        record = dropped("invalid", f"{name} is not JSON ({' '.join(str(e).split())[:200]}); write one JSON value")
        return record, record["message"]
    return (value if isinstance(value, dict) else {"value": value}), None


def _size(f: Any) -> int:
    try:
        return os.fstat(f.fileno()).st_size
    except OSError:
        return 0


def bounded_result(result: Any) -> Tuple[Optional[str], Optional[str]]:
    """A result as the daemon stores it: ``(compact JSON, why it was dropped)``. The agent's
    checks again, on what the agent sent: a result over ``RESULT_MAX_BYTES`` as compact JSON,
    nested deeper than ``MAX_DEPTH``, or not JSON at all (non-finite numbers) is replaced by a
    ``dropped`` record, with the line that says so."""
    if result is None:
        return None, None
    name = "the result"
    try:
        text = json.dumps(result if isinstance(result, dict) else {"value": result}, allow_nan=False,
                          separators=(",", ":"))
    except RecursionError:
        record = _too_deep(name)
    except (TypeError, ValueError) as e:
        record = dropped("invalid", f"{name} is not JSON ({' '.join(str(e).split())[:200]}); write one JSON value")
    else:
        if len(text.encode()) > RESULT_MAX_BYTES:
            record = _too_large(name, len(text.encode()))
        elif depth_over(text, MAX_DEPTH):
            record = _too_deep(name)
        else:
            return text, None
    return json.dumps(record), record["message"]


def metric_lines(data: bytes) -> bytes:
    """``data`` (whole metrics lines) without the lines over ``METRICS_LINE_MAX_BYTES`` or nested
    deeper than ``MAX_DEPTH``: what the daemon may parse, keep and plot."""
    lines = data.splitlines(keepends=True)
    kept = [line for line in lines
            if len(line) <= METRICS_LINE_MAX_BYTES and not depth_over(line.decode("utf-8", "replace"), MAX_DEPTH)]
    return data if len(kept) == len(lines) else b"".join(kept)
