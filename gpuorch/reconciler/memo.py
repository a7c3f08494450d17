"""The pass's one memo of "unchanged since the last pass" (``steady.py`` says what it compares).

``Memo`` owns every skip a pass makes: the steady decisions (``SteadyJobs``) and the jobs kept
unviewed with nothing new (``QuietJobs``) are its parts, not memos of their own. The pass asks it
twice a job at most, at two fixed points: ``keep`` before the job's view is built (the view and
its money checks are most of a kept job's cost), and ``keep_viewed`` once it is, for a job whose
inputs could not be compared unviewed (a gate may apply, a status read inline, a new catalog
read). Either way the job is kept only while every input of its last steady decision has the
value it had then. A job kept unviewed still gets what runs at its own pace: ``keep`` pulls its
log and metrics when its agent has something new, and sends its heartbeat when due.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping, Sequence
from datetime import datetime

from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.decide.actions import Decision
from gpuorch.reconciler.observe.status_reads import Read, ReadKey
from gpuorch.reconciler.observe.views import JobView
from gpuorch.reconciler.pass_state import Pass
from gpuorch.reconciler.steady import Quiet, QuietJobs, Steady, SteadyJobs, kept_unviewed
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt

log = logging.getLogger("gpuorch.reconciler")

Pull = Callable[[int, Sequence[tuple[Attempt, Runner]]], None]  # Pulls.pull: a job's log and metrics
Beat = Callable[..., None]  # Applier.beat(job_id, row, instance, number=, now=): a heartbeat when due
Ask = Callable[[str, Instance | None], Provider | None]  # Reconciler._worth_asking


class Memo:
    """Only the pass's thread uses it."""

    def __init__(self, boot_timeout_s: Callable[[], float], pull: Pull, beat: Beat, ask: Ask) -> None:
        self.steady = SteadyJobs(boot_timeout_s)  # the steady decisions (tests read ``steady.skipped``)
        self.quiet = QuietJobs()  # the jobs kept unviewed last pass with nothing new to pull
        self._pull, self._beat, self._ask = pull, beat, ask
        self._pass: Pass | None = None
        self._batched: Mapping[ReadKey, Read] = {}
        self._behind: Container[int] = ()

    def begin_pass(self, p: Pass, started: Container[tuple[int, int, str]], batched: Mapping[ReadKey, Read],
                   behind: Container[int]) -> None:
        """``started``: the agent starts that went through (``Applier.started``: booting memos);
        ``batched``: the pass's status reads made in one call; ``behind``: the jobs whose last log
        pull left something to read (``Pulls.behind``)."""
        self._pass, self._batched, self._behind = p, batched, behind
        self.steady.begin_pass(started)
        self.quiet.begin_pass((p.index, p.avoid_key, p.settings, p.offers, p.seen_at, p.ok))

    def keep(self, job_id: int, job: object, rows: Sequence[Attempt] | None) -> float | None:
        """The memo's requeue time if the job is kept without its view: kept unviewed last pass and
        every input the same (``QuietJobs``), or its steady memo holds on its ``rows``, instances
        and statuses (``SteadyJobs.held``, ``kept_unviewed``); else None (view it)."""
        p, steady = self._pass, self.steady
        assert p is not None  # begin_pass came first
        q = self.quiet.kept(job_id, job, rows, steady.memo(job_id), p.observed, self._batched, p.now)
        if q is not None:
            steady.skipped += 1
            if q.current is not None:
                self._beat(job_id, *q.current, number=q.memo.attempt, now=p.now)
            return q.memo.requeue_after
        self.quiet.drop(job_id)
        memo = steady.held(job_id, job, p.context, p.offers, p.seen_at, p.now)
        if memo is None:
            return None
        kept = kept_unviewed(memo, job_id, rows, p.observed, p.ok, self._ask, self._batched, job_id in self._behind)
        if not kept:
            return None
        runners, current, checks = kept
        steady.skipped += 1
        if runners:  # as a viewed job's: prices and billing unchanged
            self._pull(job_id, runners)
        else:  # nothing new: the next pass may keep it on identity alone
            self.quiet.note(job_id, Quiet(job, rows, memo, checks, current))
        if current is not None:
            self._beat(job_id, *current, number=memo.attempt, now=p.now)
        return memo.requeue_after

    def keep_viewed(self, view: JobView, context: tuple[object, ...], p: Pass, billed_at: datetime | None,
                    quick: tuple[object, object] | None, started: Container[tuple[int, int, str]]) -> Steady | None:
        """The steady memo if ``view`` is what its last steady decision was made from, renewed
        with this pass's catalog read and billing check (``SteadyJobs.unchanged``, ``renew``). ``started``:
        the agent starts that went through (``Applier.started``)."""
        same = self.steady.unchanged(view, context, p.now, started)
        if same is not None:
            self.steady.renew(view, same, billed_at, quick)
        return same

    def billed(self, view: JobView) -> bool:
        return self.steady.billed(view)

    def note(self, view: JobView, d: Decision, context: tuple[object, ...], billed_at: datetime | None,
             quick: tuple[object, object] | None) -> None:
        """Remember a decision (``SteadyJobs.note``: only a steady, clock-free one is kept)."""
        self.steady.note(view, d, context, billed_at, quick)

    def forget(self, held: set[int | None]) -> None:
        self.steady.forget(held)
        self.quiet.forget(held)
