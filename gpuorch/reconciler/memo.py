"""The pass's one memo of "unchanged since the last pass" (``steady.py`` says what it compares).

``Memo`` owns every skip a pass makes: the steady decisions (``SteadyJobs``) and the jobs kept
unviewed with nothing new (``QuietJobs``) are its parts, not memos of their own. The pass asks it
twice a job at most, at two fixed points: ``keep`` before the job's view is built (the view and
its money checks are most of a kept job's cost), and ``keep_viewed`` once it is, for a job whose
inputs could not be compared unviewed (a gate may apply, a status read inline, a new catalog
read). Either way the job is kept only while every input of its last steady decision has the
value it had then; the caller then does what a kept job still gets (its heartbeat, its log pull).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from datetime import datetime

from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.decide.actions import Decision
from gpuorch.reconciler.observe.status_reads import Read, ReadKey
from gpuorch.reconciler.observe.views import JobView
from gpuorch.reconciler.pass_state import Pass
from gpuorch.reconciler.steady import Current, Quiet, QuietJobs, Steady, SteadyJobs, kept_unviewed
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt

# What a job kept before its view gets: (the runners with a log or metrics to pull, the running
# attempt's row and instance for its heartbeat, its number, the memo's requeue time)
Kept = tuple[Sequence[tuple[Attempt, Runner]], Current, int | None, float]


class Memo:
    """Only the pass's thread uses it."""

    def __init__(self, boot_timeout_s: Callable[[], float] = lambda: 900.0) -> None:
        self.steady = SteadyJobs(boot_timeout_s)  # the steady decisions (tests read ``steady.skipped``)
        self.quiet = QuietJobs()  # the jobs kept unviewed last pass with nothing new to pull

    def begin_pass(self, p: Pass, started: Container[tuple[int, int, str]]) -> None:
        """``started``: the agent starts that went through (``Applier.started``: booting memos)."""
        self.steady.begin_pass(started)
        self.quiet.begin_pass((p.index, p.avoid_key, p.settings, p.offers, p.seen_at, p.ok))

    def keep(self, job_id: int, job: object, p: Pass, rows: Sequence[Attempt] | None,
             batched: Mapping[ReadKey, Read], behind: bool,
             ask: Callable[[str, Instance | None], Provider | None]) -> Kept | None:
        """Whether the job may be kept without its view: kept unviewed last pass and every input
        the same (``QuietJobs``), or its steady memo holds on its rows, instances and statuses
        (``SteadyJobs.held``, ``kept_unviewed``). ``behind``: its last log pull left something."""
        steady = self.steady
        q = self.quiet.kept(job_id, job, rows, steady.memo(job_id), p.observed, batched, p.now)
        if q is not None:
            steady.skipped += 1
            return (), q.current, q.memo.attempt, q.memo.requeue_after
        self.quiet.drop(job_id)
        memo = steady.held(job_id, job, p.context, p.offers, p.seen_at, p.now)
        if memo is None:
            return None
        kept = kept_unviewed(memo, job_id, rows, p.observed, p.ok, ask, batched, behind)
        if not kept:
            return None
        runners, current, checks = kept
        steady.skipped += 1
        if not runners:  # nothing new: the next pass may keep it on identity alone
            self.quiet.note(job_id, Quiet(job, rows, memo, checks, current))
        return runners, current, memo.attempt, memo.requeue_after

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
