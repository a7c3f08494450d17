"""What a training process needs from gpuorch, standard library only: where checkpoints go,
which one was restored, this process's rank, the notice signal, and the completeness protocol
(docs/checkpoints.md): one directory per checkpoint, ``COMPLETE`` written last.

Outside gpuorch (no ``GPUORCH_CHECKPOINT_DIR``) everything still works, with ``./checkpoints``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

COMPLETE = "COMPLETE"


def checkpoint_dir() -> Path:
    """``$GPUORCH_CHECKPOINT_DIR`` (the agent restores the newest checkpoint into it), else ./checkpoints."""
    return Path(os.environ.get("GPUORCH_CHECKPOINT_DIR") or "checkpoints")


def resumed_from() -> str | None:
    """The name of the checkpoint the agent restored for this attempt, if any."""
    return os.environ.get("GPUORCH_RESUMED_FROM") or None


def rank() -> int:
    """This process's global rank (torchrun's ``RANK``), 0 without one."""
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def notice_signal() -> signal.Signals:
    """The signal the agent sends on a preemption notice (the spec's ``checkpoint.signal``)."""
    name = os.environ.get("GPUORCH_CHECKPOINT_SIGNAL") or "SIGUSR1"
    try:
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except KeyError:
        return signal.SIGUSR1


class NoticeFlag:
    """Set by the notice signal; the training loop checkpoints at its next step boundary.

    The handler only sets a flag: saving inside a signal handler could interrupt a half-done
    optimizer step. ``install()`` keeps a previous Python handler running too.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def install(self, sig: signal.Signals | None = None) -> NoticeFlag:
        sig = sig or notice_signal()
        self._previous = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        if callable(self._previous):
            self._previous(signum, frame)

    def clear(self) -> None:
        self.requested = False


def step_of(path: Path) -> int | None:
    """The step in a checkpoint's COMPLETE marker; None for an incomplete checkpoint."""
    try:
        data = json.loads((path / COMPLETE).read_text() or "{}")
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("step"), int):
        return int(data["step"])
    digits = "".join(c for c in reversed(path.name) if c.isdigit())[::-1]
    return int(digits) if digits else -1


def complete_checkpoints(root: Path, prefix: str = "") -> list[Path]:
    """Complete checkpoint directories under ``root`` named ``prefix*``, oldest first (by step)."""
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        if d.is_dir() and d.name.startswith(prefix) and not d.name.startswith("."):
            step = step_of(d)
            if step is not None:
                found.append((step, d.name, d))
    return [d for _, _, d in sorted(found)]


def latest_checkpoint(root: Path | None = None, prefix: str = "") -> Path | None:
    """The newest complete checkpoint (what the agent restored, or one this attempt wrote)."""
    found = complete_checkpoints(root or checkpoint_dir(), prefix)
    return found[-1] if found else None


def mark_complete(path: Path, step: int, **info: Any) -> None:
    """Write ``COMPLETE`` last, durably: from now on the agent may upload the directory."""
    for f in path.rglob("*"):
        if f.is_file():
            _fsync(f)
    tmp = path / f".{COMPLETE}.tmp"
    tmp.write_text(json.dumps({"step": step, **info}))
    _fsync(tmp)
    os.replace(tmp, path / COMPLETE)


def prune(root: Path, keep: int, prefix: str = "") -> None:
    """Delete all but the newest ``keep`` complete checkpoints (the agent has uploaded older ones
    or will skip them; the store keeps its own ``checkpoint.keep``)."""
    for old in complete_checkpoints(root, prefix)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
