"""Job output copied to the control host, so `gpuorch logs` works without reaching an instance
and after it is gone: ``$GPUORCH_HOME/logs/job-<id>/attempt-<n>.log``."""

from __future__ import annotations

import os
from pathlib import Path

from gpuorch.runners.port import Runner, RunnerUnavailable
from gpuorch.store.paths import PRIVATE_FILE, private_dir

MAX_REMEMBERED = 100_000  # attempts whose mirrored size is kept in memory


class LogMirror:
    def __init__(self, home: Path) -> None:
        self.root = home / "logs"
        self._sizes: dict[tuple[int, int], int] = {}  # (job, attempt) -> bytes mirrored

    def path(self, job_id: int, attempt: int) -> Path:
        return self.root / f"job-{job_id}" / f"attempt-{attempt}.log"

    def pull(self, job_id: int, attempt: int, runner: Runner) -> None:
        """Append whatever the runner has beyond what is mirrored already (the file size,
        remembered after the first look so that a poll with nothing new costs no file access here)."""
        key = (job_id, attempt)
        offset = self._sizes.get(key)
        if offset is None:
            try:
                offset = os.stat(self.path(job_id, attempt)).st_size
            except FileNotFoundError:
                offset = 0
        try:
            data, _ = runner.read_log(offset)
        except (RunnerUnavailable, OSError):
            return
        if data:
            p = self.path(job_id, attempt)
            private_dir(p.parent)  # a job's output may print its env: its owner's alone
            with open(os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE), "ab") as f:
                f.write(data)
                offset = f.tell()
        if len(self._sizes) >= MAX_REMEMBERED:
            self._sizes.clear()
        self._sizes[key] = offset
