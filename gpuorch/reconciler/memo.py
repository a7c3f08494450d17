"""The pass's one memo of "unchanged since the last pass" (``steady.py`` says what it compares).

``Memo`` owns every skip a pass makes: the steady decisions (``SteadyJobs``) and the jobs kept
unviewed with nothing new (``QuietJobs``; those nothing touched since are not walked at all,
``QuietJobs.untouched``) are its parts, not memos of their own. The pass asks it
twice a job at most, at two fixed points: ``keep`` before the job's view is built (the view and
its money checks are most of a kept job's cost), and ``keep_viewed`` once it is, for a job whose
inputs could not be compared unviewed (a gate may apply, a status read inline, a new catalog
read). Either way the job is kept only while every input of its last steady decision has the
value it had then. A job kept unviewed still gets what runs at its own pace: ``keep`` pulls its
log and metrics when its agent has something new, and sends its heartbeat when due.

A queued job that no offer fits (``decide/job.py`` ``_launch``) is its third part
(``WaitingJobs``, issue 32 item 5): it is looked at again only when something its "no offer"
was decided from changes, not every ``no_offer_retry_s``. Those inputs are the job row (its
status, message, spec, volume zone, counts, cancel request and ``updated_at``: any write on it,
a cancel included), its attempt rows (id and status), the offers index (a catalog read that
differs; an equal one keeps the index), the back-off keys in force (one starting or expiring)
and the settings, all compared by value, and only for a job no gate can apply to (``quick``:
no budget, daily cap or sweep; a gated one still waits ``no_offer_retry_s`` as ``decide``
says), with no deadline, every catalog known (``Pass.complete``) and no live attempt. Its wait
is the memo's then, not the row's: ``unplaceable`` writes the "no offer" message with no
``not_before`` (nothing at all when the row says so already), so a change is decided at once,
and the pass it asks for is the daemon's base or the end of the first back-off in force
(``WaitingJobs.begin_pass``). The write's row is matched by value on the next pass
(``Waiting.message``); a pass without a write (``Store.data_version`` unchanged) reads no row.
And a pass whose claim holds the very row objects of the last one, none taken anew
(``Pass.unchanged``, ``Leases.unchanged``: a renewal keeps them, any other write to a held row
makes it read again) keeps the jobs the last pass kept as one set (``WaitingJobs.untouched``),
without a look at each: the row and its attempt rows are then the objects compared last pass,
and the context was compared once (``Memo.todo``; a look at each was ~4 us a job a pass).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.decide.actions import Decision, SetJob
from gpuorch.reconciler.observe.listing import Key
from gpuorch.reconciler.observe.status_reads import Read, ReadKey
from gpuorch.reconciler.observe.views import JobView
from gpuorch.reconciler.pass_state import Pass
from gpuorch.reconciler.steady import (
    Check,
    Current,
    Steady,
    SteadyJobs,
    clock_free,
    expired,
    kept_unviewed,
    same_context,
    same_value,
)
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt, Job, JobStatus

log = logging.getLogger("gpuorch.reconciler")

Pull = Callable[[int, Sequence[tuple[Attempt, Runner]]], None]  # Pulls.pull: a job's log and metrics
Beat = Callable[..., None]  # Applier.beat(job_id, row, instance, number=, now=): a heartbeat when due
Ask = Callable[[str, Instance | None], Provider | None]  # Reconciler._worth_asking
NO_OFFER = "no offer fits the job"  # how decide's "no offer" SetJob message begins (decide/job.py _launch)


def _row(job: Job) -> tuple[object, ...]:
    """What of a job row a "no offer" depends on, and its version (``updated_at``: any write)."""
    return (job.status, job.message, job.not_before, job.cancel_requested, job.spec, job.volume_zone,
            job.preemptions, job.failures, job.updated_at)


def _attempts(rows: Sequence[Attempt] | None) -> tuple[tuple[int | None, object], ...]:
    return tuple((r.id, r.status) for r in rows) if rows else ()


@dataclass(slots=True)
class Waiting:
    job: Job  # the row it was decided on; once ``message`` is None, the row as it is now
    attempts: tuple[tuple[int | None, object], ...]  # (id, status) of its attempt rows
    message: str | None  # the message ``unplaceable`` wrote: the next row read is matched to it (None: matched)


class WaitingJobs:
    """Queued jobs no offer fits, kept until an input of that answer changes (module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[int, Waiting] = {}
        self.noted = 0  # "no offer" decisions noted, in all (tests and benchmarks read it)
        self.skipped = 0  # jobs kept in the last pass
        self.wait_s = 30.0  # the pass's requeue for them (``begin_pass``)
        self._context: tuple[object, ...] = ()  # the offers index, back-off keys and settings of every entry
        self._kept: set[int] = set()  # the jobs kept this pass (``kept``, ``untouched``)
        self.untouched: set[int] = set()  # the jobs this pass keeps as a set, unlooked at (``begin_pass``)

    def begin_pass(self, p: Pass) -> None:
        """Every entry is dropped when the pass's context (the offers index, the back-off keys, the
        settings) differs in value from theirs, or a catalog is missing: one compare a pass, not
        one a job. A waiting job asks for no pass of its own: the daemon's base
        (``no_offer_retry_s`` of wall time, as an idle daemon), or sooner the end of the first
        back-off in force, when the offers it avoids come back with no write. When the pass's
        rows are the last pass's (``Pass.unchanged``) and the context kept the entries, the jobs
        the last pass kept are kept again as a set (``untouched``): each would compare the same."""
        if self._entries and (not p.complete or not same_context(self._context, p.context)):
            self._entries.clear()
        self._context = p.context
        self.untouched = self._kept & self._entries.keys() if p.unchanged else set()
        self._kept = set(self.untouched)
        self.skipped, wait = 0, p.settings.no_offer_retry_s
        if p.backoff_until is not None:
            wait = min(wait, max(0.0, (p.backoff_until - p.now).total_seconds()))
        self.wait_s = wait

    def note(self, job_id: int, entry: Waiting) -> None:
        self._entries[job_id] = entry
        self.noted += 1

    def drop(self, job_id: int) -> None:
        self._entries.pop(job_id, None)

    def kept(self, job_id: int, job: Job, rows: Sequence[Attempt] | None) -> float | None:
        """The job's requeue time if its "no offer" still holds (every input the same value; the
        pass's context was compared in ``begin_pass``), else None."""
        e = self._entries.get(job_id)
        if e is None:
            return None
        if _attempts(rows) != e.attempts or ((job is not e.job or e.message is not None)
                                             and not self._same_row(e, job)):
            del self._entries[job_id]
            return None
        self.skipped += 1
        self._kept.add(job_id)
        return self.wait_s

    @staticmethod
    def _same_row(e: Waiting, job: Job) -> bool:
        """A new row object of the same value (adopted), or the row ``unplaceable``'s write left."""
        if e.message is None:
            same = _row(job) == _row(e.job)
        else:  # written since: the message, no not_before and a new updated_at, the rest as it was
            expect = (JobStatus.QUEUED, e.message, None, False, *_row(e.job)[4:8])
            same = _row(job)[:8] == expect
        if same:
            e.job, e.message = job, None
        return same

    def forget(self, held: set[int | None]) -> None:
        if not self._entries.keys() <= held:
            self._entries = {k: v for k, v in self._entries.items() if k in held}


@dataclass(frozen=True, slots=True)
class Quiet:
    job: object
    rows: object  # the job's list of attempt rows (HeldRows keeps the list while the rows stay)
    memo: Steady
    checks: tuple[Check, ...]
    current: Current  # its heartbeat's attempt (``memo.attempt`` is its number)


def _moved(before: Mapping[tuple[str, int, int], object] | Mapping[ReadKey, object],
           now: Mapping[tuple[str, int, int], object] | Mapping[ReadKey, object]) -> set[int]:
    """The job ids (a key's second item) of the keys whose value in ``now`` is not the very object
    of ``before``, or that are gone: one look a key, no compare of values."""
    get = before.get
    out = {k[1] for k, v in now.items() if get(k) is not v}  # type: ignore[arg-type]
    if len(before) > len(now) - len(out):  # some keys may be gone
        out.update(k[1] for k in before.keys() - now.keys())
    return out


class QuietJobs:
    """Live jobs kept unviewed with nothing new to pull (issue 18): kept again on identity checks
    and status values alone, cheaper than ``held`` and ``kept_unviewed``, which they stand for. An
    entry holds while the pass's context (the offers index, back-off keys, settings, offers list,
    catalog read, providers listed) is what it was (``begin_pass`` drops every entry otherwise),
    the job's row, its list of attempt rows and its steady memo are the very objects
    ``kept_unviewed`` compared, each live attempt's instance and agent status has the value it
    had, with no new read (``Read.new``). That is everything ``held`` and ``kept_unviewed`` read,
    so they would keep the job too. A job not kept here goes the usual way and its entry is
    dropped (``drop``).

    And a live job nothing touched is not walked at all (issue 32 item 5, ``untouched``): kept
    last pass, and this pass has the very objects of the last one for its job row, its list of
    attempt rows, its steady memo, and every listing key and status read key of its job (the
    listing and the batched reads are compared to the last pass's once, key by key by identity:
    ``_moved``), no launch or read of it out, and its boot deadline not passed. Its checks then
    hold as they held last pass. Its heartbeat still goes out when due (``keep_untouched``)."""

    def __init__(self) -> None:
        self._entries: dict[int, Quiet] = {}
        self._context: tuple[object, ...] = ()
        self._observed: Mapping[Key, Instance] = {}  # the last pass's listing and batched reads (``_moved``)
        self._batched: Mapping[ReadKey, Read] = {}
        self._kept: set[int] = set()  # the jobs kept or noted this pass
        self.untouched: set[int] = set()  # the jobs this pass keeps as a set, unlooked at (``begin_pass``)

    def begin_pass(self, context: tuple[object, ...], p: Pass, attempts: Mapping[int, Sequence[Attempt]],
                   batched: Mapping[ReadKey, Read], memos: Mapping[int, Steady]) -> None:
        was, self._context = self._context, context
        if self._entries and not same_context(was, context):
            self._entries.clear()
        held, self._kept, self.untouched = self._kept, set(), set()
        before, self._observed, self._batched = (self._observed, self._batched), p.observed, batched
        if not held or not self._entries:
            return
        touched = _moved(before[0], p.observed) | _moved(before[1], batched) | p.busy
        entries, now = self._entries, p.now  # ``expired`` inlined: one call a job was a third of this
        self.untouched = {i for i, job in zip(p.ids, p.claimed, strict=True) if i in held and i not in touched
                          and (e := entries.get(i)) is not None and e.job is job and e.rows is attempts.get(i)
                          and (m := e.memo) is memos.get(i) and (m.until is None or now <= m.until)}
        self._kept = set(self.untouched)

    def keep_untouched(self, beat: Beat, now: datetime) -> float:
        """The ``untouched`` jobs kept: their heartbeats sent when due; their first requeue."""
        requeue, entries = float("inf"), self._entries
        for job_id in self.untouched:
            e = entries[job_id]
            if e.current is not None:
                beat(job_id, *e.current, number=e.memo.attempt, now=now)
            if e.memo.requeue_after < requeue:
                requeue = e.memo.requeue_after
        return requeue

    def note(self, job_id: int, entry: Quiet) -> None:
        self._entries[job_id] = entry
        self._kept.add(job_id)

    def drop(self, job_id: int) -> None:
        self._entries.pop(job_id, None)

    def kept(self, job_id: int, job: object, rows: object, memo: Steady | None,
             observed: Mapping[tuple[str, int, int], Instance], batched: Mapping[ReadKey, Read],
             now: datetime) -> Quiet | None:
        e = self._entries.get(job_id)
        if e is None or e.job is not job or e.rows is not rows or e.memo is not memo or expired(e.memo, now):
            return None
        for okey, inst, rkey, value, reachable in e.checks:
            if (now_inst := observed.get(okey)) is not inst and now_inst != inst:  # by value
                return None
            if rkey is not None:
                r = batched.get(rkey)
                if r is None or r.new or not same_value(r.value, value) or r.reachable != reachable:
                    return None
        self._kept.add(job_id)
        return e

    def forget(self, held: set[int | None]) -> None:
        if not self._entries.keys() <= held:
            self._entries = {k: v for k, v in self._entries.items() if k in held}


class Memo:
    """Only the pass's thread uses it."""

    def __init__(self, boot_timeout_s: Callable[[], float], pull: Pull, beat: Beat, ask: Ask) -> None:
        self.steady = SteadyJobs(boot_timeout_s)  # the steady decisions (tests read ``steady.skipped``)
        self.quiet = QuietJobs()  # the jobs kept unviewed last pass with nothing new to pull
        self.waiting = WaitingJobs()  # queued jobs no offer fits, until an input changes
        self._pull, self._beat, self._ask = pull, beat, ask
        self._pass: Pass | None = None
        self._batched: Mapping[ReadKey, Read] = {}
        self._behind: Container[int] = ()

    def begin_pass(self, p: Pass, started: Container[tuple[int, int, str]], batched: Mapping[ReadKey, Read],
                   behind: Container[int], attempts: Mapping[int, Sequence[Attempt]]) -> None:
        """``started``: the agent starts that went through (``Applier.started``: booting memos);
        ``batched``: the pass's status reads made in one call; ``behind``: the jobs whose last log
        pull left something to read (``Pulls.behind``); ``attempts``: the held jobs' attempt rows."""
        self._pass, self._batched, self._behind = p, batched, behind
        self.steady.begin_pass(started)
        self.waiting.begin_pass(p)
        self.quiet.begin_pass((p.index, p.avoid_key, p.settings, p.offers, p.seen_at, p.ok), p, attempts, batched,
                              self.steady.memos)

    def todo(self, p: Pass) -> Iterable[tuple[int, Job]]:
        """The claimed (id, row) pairs the pass looks at, in claim order: all but the jobs kept as
        a set, waiting (``WaitingJobs.untouched``) or live (``QuietJobs.untouched``: their
        heartbeats sent when due), whose requeue the pass takes at once."""
        waiting, quiet = self.waiting.untouched, self.quiet.untouched
        if waiting:
            self.waiting.skipped += len(waiting)
            p.lower(self.waiting.wait_s)
        if quiet:
            self.steady.skipped += len(quiet)
            p.lower(self.quiet.keep_untouched(self._beat, p.now))
        skip = (waiting | quiet) if waiting and quiet else (waiting or quiet)
        if not skip:
            return zip(p.ids, p.claimed, strict=True)
        return [(i, j) for i, j in zip(p.ids, p.claimed, strict=True) if i not in skip]

    def keep(self, job_id: int, job: Job, rows: Sequence[Attempt] | None) -> float | None:
        """The memo's requeue time if the job is kept without its view: kept unviewed last pass and
        every input the same (``QuietJobs``), or its steady memo holds on its ``rows``, instances
        and statuses (``SteadyJobs.held``, ``kept_unviewed``); else None (view it)."""
        p, steady = self._pass, self.steady
        assert p is not None  # begin_pass came first
        if (w := self.waiting.kept(job_id, job, rows)) is not None:
            return w
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

    def unplaceable(self, view: JobView, d: Decision, context: tuple[object, ...],
                    quick: tuple[object, object] | None) -> Decision:
        """``d`` as applied: a "no offer" decision of a job the memo can wait for (module docstring)
        is noted and writes its message with no ``not_before`` (or nothing, the row saying so
        already); any other decision drops the job's entry and is returned as it is."""
        job, p, acts = view.job, self._pass, d.actions
        job_id = job.id or 0
        a = acts[0] if len(acts) == 1 else None
        if not isinstance(a, SetJob) or a.status != JobStatus.QUEUED or a.finished or a.message is None \
                or not a.message.startswith(NO_OFFER) or quick is None or p is None or not p.complete \
                or job.cancel_requested or not clock_free(view) or any(x.row.status.live for x in view.attempts) \
                or not same_context(context, p.context):  # decided from the pass's index, back-offs, settings
            self.waiting.drop(job_id)
            return d
        written = job.status != a.status or job.message != a.message or job.not_before is not None
        rows = [x.row for x in view.attempts]
        self.waiting.note(job_id, Waiting(job, _attempts(rows), a.message if written else None))
        return Decision([replace(a, not_before=None)] if written else [], self.waiting.wait_s)

    def billed(self, view: JobView) -> bool:
        return self.steady.billed(view)

    def note(self, view: JobView, d: Decision, context: tuple[object, ...], billed_at: datetime | None,
             quick: tuple[object, object] | None) -> None:
        """Remember a decision (``SteadyJobs.note``: only a steady, clock-free one is kept)."""
        self.steady.note(view, d, context, billed_at, quick)

    def forget(self, held: set[int | None]) -> None:
        self.steady.forget(held)
        self.quiet.forget(held)
        self.waiting.forget(held)
