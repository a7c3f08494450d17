"""Job output copied to the control host, so `gpuorch logs` works without reaching an instance
and after it is gone: ``$GPUORCH_HOME/logs/job-<id>/attempt-<n>.log``."""

from __future__ import annotations

from pathlib import Path

from .runner import Runner, RunnerUnavailable


class LogMirror:
    def __init__(self, home: Path) -> None:
        self.root = home / "logs"

    def path(self, job_id: int, attempt: int) -> Path:
        return self.root / f"job-{job_id}" / f"attempt-{attempt}.log"

    def pull(self, job_id: int, attempt: int, runner: Runner) -> None:
        """Append whatever the runner has beyond what is mirrored already (the file size)."""
        p = self.path(job_id, attempt)
        offset = p.stat().st_size if p.exists() else 0
        try:
            data, _ = runner.read_log(offset)
        except (RunnerUnavailable, OSError):
            return
        if data:
            p.parent.mkdir(parents=True, exist_ok=True)
            with p.open("ab") as f:
                f.write(data)
