"""Launches sent whose instance may not be listed yet: one small file per client token under
``$GPUORCH_HOME/lambda/launching/`` (in memory without a home), dated by the wall clock so a
restarted daemon sees its predecessor's. ``in_flight(token)`` is true for ``grace_s`` after the
launch was sent; after that a launch that never appeared is taken as lost and may be repeated."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

_SAFE = re.compile(r"[A-Za-z0-9_.\-]{1,80}")


class LaunchIntents:
    def __init__(self, home: Path | None, grace_s: float, wall: Callable[[], float]) -> None:
        self.dir = Path(home) / "lambda" / "launching" if home is not None else None
        self.grace_s, self.wall = grace_s, wall
        self._memory: dict[str, float] = {}

    def _path(self, token: str) -> Path | None:
        if self.dir is None or not _SAFE.fullmatch(token):
            return None
        return self.dir / token

    def record(self, token: str) -> None:
        now = self.wall()
        self._memory[token] = now
        path = self._path(token)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(f"{now!r}\n")
            os.replace(tmp, path)  # written before the launch is sent: a crash after it finds this

    def sent_at(self, token: str) -> float | None:
        path = self._path(token)
        if path is not None:
            try:
                return float(path.read_text().strip())
            except (OSError, ValueError):
                pass
        return self._memory.get(token)

    def in_flight(self, token: str) -> bool:
        sent = self.sent_at(token)
        return sent is not None and 0 <= self.wall() - sent < self.grace_s

    def forget(self, token: str) -> None:
        self._memory.pop(token, None)
        path = self._path(token)
        if path is not None:
            path.unlink(missing_ok=True)
