"""Job output copied to the control host, so `gpuorch logs` works without reaching an instance
and after it is gone: ``$GPUORCH_HOME/logs/job-<id>/attempt-<n>.log``; and the job's metrics
lines beside it (``attempt-<n>.metrics.jsonl``), the history the dashboard plots (the store keeps
only each metric's latest value)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpuorch.runners.port import Runner, RunnerUnavailable
from gpuorch.store.paths import PRIVATE_FILE, private_dir

MAX_REMEMBERED = 100_000  # attempts whose mirrored size is kept in memory
PULL_LIMIT = 1 << 20  # bytes of a job's log one pull copies at most: Runner.read_log's default limit


class LogMirror:
    def __init__(self, home: Path) -> None:
        self.root = home / "logs"
        self._sizes: dict[tuple[int, int], int] = {}  # (job, attempt) -> bytes mirrored

    def path(self, job_id: int, attempt: int) -> Path:
        return self.root / f"job-{job_id}" / f"attempt-{attempt}.log"

    def metrics_path(self, job_id: int, attempt: int) -> Path:
        return self.root / f"job-{job_id}" / f"attempt-{attempt}.metrics.jsonl"

    def append_metrics(self, job_id: int, attempt: int, lines: bytes) -> None:
        """Keep whole metrics lines the daemon has just consumed (after it recorded how far it read:
        a crash in between loses those points from the plot, never doubles them)."""
        if not lines:
            return
        p = self.metrics_path(job_id, attempt)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("ab") as f:
            f.write(lines)

    def metric_history(self, job_id: int, attempts: list[int], metric: str,
                       limit: int = 5000) -> list[tuple[float, float]]:
        """``(step, value)`` of one numeric metric over the job's attempts in order; the step is the
        line's ``step`` when it has one, else its position."""
        out: list[tuple[float, float]] = []
        for n in attempts:
            try:
                data = self.metrics_path(job_id, n).read_bytes()
            except FileNotFoundError:
                continue
            for line in data.splitlines():
                try:
                    obj: Any = json.loads(line)
                except ValueError:
                    continue
                v = obj.get(metric) if isinstance(obj, dict) else None
                if isinstance(v, bool) or not isinstance(v, int | float):
                    continue
                step = obj.get("step")
                x = float(step) if isinstance(step, int | float) and not isinstance(step, bool) else float(len(out))
                out.append((x, float(v)))
        return out[-limit:]

    def pull(self, job_id: int, attempt: int, runner: Runner) -> bool:
        """Append whatever the runner has beyond what is mirrored already (the file size,
        remembered after the first look so that a poll with nothing new costs no file access here).
        Whether it caught up: False if the runner could not be read or had more than one read."""
        key = (job_id, attempt)
        offset = self._sizes.get(key)
        if offset is None:
            try:
                offset = os.stat(self.path(job_id, attempt)).st_size
            except FileNotFoundError:
                offset = 0
        try:
            data, _ = runner.read_log(offset)  # at most PULL_LIMIT
        except (RunnerUnavailable, OSError):
            return False
        if data:
            p = self.path(job_id, attempt)
            private_dir(p.parent)  # a job's output may print its env: its owner's alone
            with open(os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE), "ab") as f:
                f.write(data)
                offset = f.tell()
        if len(self._sizes) >= MAX_REMEMBERED:
            self._sizes.clear()
        self._sizes[key] = offset
        return len(data) < PULL_LIMIT
