"""The log and metrics of attempts whose agent answered: copied to the control host each pass.

A job kept without its view (steady.py) is pulled only for what its provider says is new
(``status_reads.Read.new``) or when its last pull left something behind (``behind``: a log longer
than one pull, or a read that failed), so a quiet agent costs no file access (issue 18).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from gpuorch.jobs.logmirror import LogMirror
from gpuorch.reconciler.apply.money import Money
from gpuorch.reconciler.observe.status_reads import RUNNER_ERRORS
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt

log = logging.getLogger("gpuorch.reconciler")


class Pulls:
    def __init__(self, logs: LogMirror | None, money: Money, now: Callable[[], datetime]) -> None:
        self.logs, self.money, self.now = logs, money, now
        self.behind: set[int] = set()  # jobs whose last pull left something to read

    def pull(self, job_id: int, runners: Sequence[tuple[Attempt, Runner]]) -> None:
        behind = False
        for row, runner in runners:
            try:
                if self.logs is not None and not self.logs.pull(job_id, row.number, runner):
                    behind = True
            except RUNNER_ERRORS as e:
                behind = True
                log.info("job %s attempt %s: log not read this pass: %s", job_id, row.number, e)
            self.money.collect_metrics(job_id, row, runner, self.now())
        if behind:  # pulled next pass even if nothing new is written
            self.behind.add(job_id)
        elif self.behind:
            self.behind.discard(job_id)

    def forget(self, held: set[int | None]) -> None:
        if self.behind:
            self.behind = {j for j in self.behind if j in held}
