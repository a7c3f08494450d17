"""The local side of the checkpoint protocol: which checkpoint directories are complete.

The job writes each checkpoint as a subdirectory of ``$GPUORCH_CHECKPOINT_DIR`` and creates the
file ``COMPLETE`` inside it last (optionally JSON such as ``{"step": 120}``). A directory without
``COMPLETE`` is still being written (or was abandoned by a crash) and is never uploaded.
Hidden directories (leading ``.``) are ignored: restores stage there before renaming into place.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Tuple

COMPLETE = "COMPLETE"
Order = Tuple[int, float, str]  # sort key of a checkpoint: step, completion time, name
_TRAILING_DIGITS = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class LocalCheckpoint:
    name: str
    path: Path
    step: int | None  # from COMPLETE's JSON, else the name's trailing digits, else None
    completed_at: float  # COMPLETE's mtime: when the job finished writing it

    @property
    def order(self) -> Order:
        """Sort key, oldest first: step, then completion time. Step-less ones sort first."""
        return (self.step if self.step is not None else -1, self.completed_at, self.name)


def read_checkpoint(path: Path) -> LocalCheckpoint | None:
    """The checkpoint at ``path`` if it is complete, else None."""
    marker = path / COMPLETE
    try:
        mtime = marker.stat().st_mtime
        text = marker.read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return LocalCheckpoint(path.name, path, _step(text, path.name), mtime)


def _step(marker_text: str, name: str) -> int | None:
    try:
        step = json.loads(marker_text).get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    except (ValueError, AttributeError):
        pass
    m = _TRAILING_DIGITS.search(name)
    return int(m.group(1)) if m else None


def complete_checkpoints(root: Path) -> list[LocalCheckpoint]:
    """Complete checkpoints directly under ``root``, oldest first; [] if ``root`` is missing."""
    try:
        with os.scandir(root) as it:
            dirs = [Path(e.path) for e in it if e.is_dir() and not e.name.startswith(".")]
    except FileNotFoundError:
        return []
    found = (read_checkpoint(d) for d in dirs)
    return sorted((c for c in found if c is not None), key=lambda c: c.order)


def newest_checkpoint(root: Path) -> LocalCheckpoint | None:
    found = complete_checkpoints(root)
    return found[-1] if found else None


def checkpoint_files(path: Path) -> Iterator[tuple[str, Path]]:
    """``(relative posix path, absolute path)`` of every regular file in a checkpoint, sorted."""
    for dirpath, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = Path(dirpath) / name
            if full.is_file():
                yield full.relative_to(path).as_posix(), full
