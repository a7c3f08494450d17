"""Skip the jobs whose observation did not change: a steady pass pays for its reads, not for decide.

``decide`` is pure: the same view, offers, back-offs and settings give the same decision, except
where it reads ``now``. ``SteadyJobs`` remembers, per job, the inputs of the last decision that
was the steady pair of a running attempt, ``(Progress, Heartbeat)``, and skips decide and apply
for the job while all of these hold:

1. every input has the value it had then. Change is a value, never an identity (DESIGN.md 4,
   docs/recovery.md): each agent status is compared by its value (``runners.port.status_value``,
   a small tuple taken when it was read), so a runner that hands out one status object refreshed
   in place is still seen to change; each instance is compared by value (``same_instance``: a
   frozen value, so the same object first, else equal fields: a provider that lists a new object
   for an unchanged instance keeps its jobs); the job row and each attempt row by identity, which
   is their version here, not a value: the store's rows are new objects after any write on the
   job (``Reconciler._txn`` drops the cached rows; after a cancel request or a takeover,
   ``Leases.claim``), and ``HeldRows`` hands out the same object while nobody wrote; whether the runner
   answered and whether the provider was listed are booleans; the offers index, the back-off
   keys and the settings are compared by identity or else equality (``same_context``). A new
   object of the same value is merely decided again, never a change missed;
2. nothing on the steady path reads the clock: no attempt is draining (its deadline), no money
   gate applies (caps and sweeps read cost, which grows with time) and the spec has no deadline,
   no ``max_duration`` and no ``idle_stop`` (``JobSpec.reads_clock``).
   Everything else ``decide`` does for a running attempt with an agent that answered, no notice
   and a live instance returns the steady pair whatever ``now`` is (``attempt_steps.live``).

A skipped job still gets what runs at its own pace: its log and metrics are mirrored and its
spot price tracked (before, as for every job) and its heartbeat goes out when due (``Applier``).
Its billing is not checked again (``billed``): ``money.record.corrections`` of the same attempt
row and the same instance is the same (nothing) once every time the instance reports lies in
the past, as it did when the steady decision was noted (a write there renews the rows).
A steady pair's apply writes nothing the second time (``Recording.progress`` writes only what
changed, and a write would have renewed the rows), so skipping it is the same as running it.

A booting attempt is skipped too (issue 18: a drain's launched jobs were decided every pass until
their agents answered): a launched attempt whose instance is alive and whose agent has not
answered, for which decide says "start its agent" (reachable) or nothing (not yet). There the
only clock decide reads is the boot timeout, so the memo holds until it, and a start is skipped
only once its runner's start returned (``Applier.started``: this daemon does not start it again).
No heartbeat goes out for it (decide sends none to an agent that never answered).

A running or booting job's steady memo may be used before its view is built (``held``, then
``kept_unviewed``; issue 18: the view, the money checks and the compare above cost ~40 us a
job a pass): when no gate can ever apply to the job (no daily cap, budget or sweep), its
placement offers were the pass's index, its billing was checked with nothing to correct, and this
pass has the same job row, offers list and catalog read (``seen_at``: so no spot price can have
moved for its same rows) and the same context; a booting memo also needs the pass's ``now``
before its boot deadline (``Steady.until``) and its agent start gone through (as ``unchanged``).
Then the attempt rows, instances and listed-or-not are compared as above, and the batched agent
statuses by the values their reads took, from plain keys read when the memo was noted
(``Steady.keys``); the job's log and
metrics are pulled and its heartbeat goes out when due, as for a viewed job. Anything else (a
status read inline or off the pass, a new object anywhere) builds the view as above. A memo
kept by ``unchanged`` is renewed with the pass's catalog read and billing check (``renew``).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from gpuorch.clock import aware
from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.decide.actions import Decision, Heartbeat, Progress, StartAgent
from gpuorch.reconciler.observe.status_reads import Read, ReadKey
from gpuorch.reconciler.observe.views import JobView
from gpuorch.runners.port import Runner, StatusValue, status_value
from gpuorch.store.models import Attempt, AttemptStatus

# (row, instance, the agent status's value, reachable, observed) of each attempt, in order
Seen = tuple[tuple[object, object, StatusValue | None, bool, bool], ...]
# what kept_unviewed compared for an attempt not ended: (listing key, instance, read key or None, status value,
# reachable)
Check = tuple[tuple[str, int, int], Instance | None, ReadKey | None, StatusValue | None, bool]
Current = tuple[Attempt, Instance | None] | None  # the running attempt's row and instance (its heartbeat)


@dataclass(frozen=True, slots=True)  # one a held job: slots, no __dict__ (10,000 of them)
class Steady:
    job: object
    attempts: Seen
    context: tuple[object, ...]  # the offers index, the back-off keys, the settings
    attempt: int | None  # the running attempt the steady pair is about (its heartbeat); None: booting
    requeue_after: float
    billed: bool = False  # no instance time lay in the future: billing corrections would repeat (none)
    boot: tuple[int, str, datetime | None] | None = None  # booting: (attempt, instance id, launched at)
    quick: tuple[object, object] | None = None  # (offers, seen_at) when it may be kept unviewed (``held``)
    keys: tuple[tuple[str, int, bool], ...] = ()  # (provider, number, ended) of each attempt row, read once
    until: datetime | None = None  # booting: its boot deadline (launched + the boot timeout); None: none


def expired(memo: Steady, now: datetime) -> bool:
    """Whether a booting memo's boot deadline has passed (decide then ends the attempt)."""
    return memo.until is not None and now > memo.until


def _seen(view: JobView) -> Seen:
    return tuple((a.row, a.instance, status_value(a.agent), a.reachable, a.observed) for a in view.attempts)


def same_value(a: StatusValue | None, b: StatusValue | None) -> bool:
    """Two status values alike (``status_value``): mostly the one tuple, else compared item by item."""
    return a is b or a == b


def same_instance(a: object, b: object) -> bool:
    """The same instance as then, by value: the same object (the usual case, no compare), or equal."""
    return a is b or a == b


def same_context(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Element by element, by identity or else equality (an offers index is never compared deeply)."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def _same(a: Seen, b: Seen) -> bool:
    return len(a) == len(b) and all(x[0] is y[0] and same_instance(x[1], y[1]) and same_value(x[2], y[2])
                                    and x[3] == y[3] and x[4] == y[4] for x, y in zip(a, b, strict=True))


def steady_attempt(d: Decision) -> int | None:
    """The attempt number if ``d`` is exactly the steady pair of one running attempt, else None."""
    acts = d.actions
    if len(acts) == 2 and isinstance(acts[0], Progress) and isinstance(acts[1], Heartbeat) \
            and acts[0].attempt == acts[1].attempt:
        return acts[0].attempt
    return None


def booting(view: JobView, d: Decision) -> tuple[int, str, datetime | None] | None:
    """(attempt, instance id, launched at) if ``d`` is decide's word on a booting attempt (above)."""
    if not view.attempts:
        return None
    a = view.attempts[-1]
    row, inst = a.row, a.instance
    if row.status != AttemptStatus.LAUNCHED or row.start_error is not None or a.agent is not None \
            or inst is None or not inst.state.alive or not a.observed:
        return None
    if list(d.actions) != ([StartAgent(row.number)] if a.reachable else []):
        return None
    return row.number, inst.id, row.launched_at or row.requested_at


def clock_free(view: JobView) -> bool:
    """Whether decide's steady path for this view reads no clock (point 2 above)."""
    return view.gate is None and view.spec.deadline is None and not view.spec.reads_clock and not any(
        a.row.status == AttemptStatus.DRAINING for a in view.attempts)


def past(view: JobView, now: datetime) -> bool:
    """Whether every time the attempts' instances report (launch, end) lies before ``now``."""
    for a in view.attempts:
        inst = a.instance
        if inst is not None and any(t is not None and t > now for t in (aware(inst.created_at), aware(inst.ended_at))):
            return False
    return True


def _boot_holds(memo: Steady, job_id: int, now: datetime, started: Container[tuple[int, int, str]]) -> bool:
    """Whether a booting memo still holds at ``now``: before its boot deadline (decide then ends the
    attempt), and its agent start went through if its runner was reachable (else apply makes it again)."""
    assert memo.boot is not None
    if expired(memo, now):
        return False
    number, instance_id, _ = memo.boot
    return not memo.attempts[-1][3] or (job_id, number, instance_id) in started


class SteadyJobs:
    """The steady decisions of the last passes, by job id. Only the pass's thread uses it."""

    def __init__(self, boot_timeout_s: Callable[[], float] = lambda: 900.0) -> None:
        self.boot_timeout_s = boot_timeout_s  # Settings.boot_timeout_s: a booting memo holds until it
        self._memo: dict[int, Steady] = {}
        self.skipped = 0  # jobs skipped in the last pass (tests and benchmarks read it)
        self.started: Container[tuple[int, int, str]] = ()  # the pass's Applier.started (``held``)
        # ``unchanged``'s view and what it saw, for ``note`` of the same view: the statuses' values
        # from before decide read them (a runner refreshing one in place meanwhile is seen next pass)
        self._viewed: tuple[JobView, Seen] | None = None

    def begin_pass(self, started: Container[tuple[int, int, str]] = ()) -> None:
        self.skipped, self.started = 0, started

    def unchanged(self, view: JobView, context: tuple[object, ...], now: datetime | None = None,
                  started: Container[tuple[int, int, str]] = ()) -> Steady | None:
        """The remembered steady decision if nothing it was made from changed, else None. A
        booting one needs ``now`` (before the boot timeout) and ``started`` (``Applier.started``)."""
        seen = _seen(view)
        self._viewed = (view, seen)
        memo = self._memo.get(view.job.id or 0)
        if memo is None or memo.job is not view.job or not clock_free(view) or not same_context(memo.context, context) \
                or not _same(memo.attempts, seen):
            return None
        if memo.boot is not None and (now is None or not _boot_holds(memo, view.job.id or 0, now, started)):
            return None
        self.skipped += 1
        return memo

    def billed(self, view: JobView) -> bool:
        """Whether this job's billing was checked on these very attempt rows and instances, with
        nothing to correct then or later (``Steady.billed``)."""
        memo = self._memo.get(view.job.id or 0)
        return memo is not None and memo.billed and memo.job is view.job and len(memo.attempts) == len(view.attempts) \
            and all(m[0] is a.row and same_instance(a.instance, m[1])
                    for m, a in zip(memo.attempts, view.attempts, strict=True))

    def memo(self, job_id: int) -> Steady | None:
        return self._memo.get(job_id)

    @property
    def memos(self) -> Mapping[int, Steady]:
        """The memos by job id (read only: ``QuietJobs.begin_pass`` compares them by identity)."""
        return self._memo

    def held(self, job_id: int, job: object, context: tuple[object, ...], offers: object,
             seen_at: object, now: datetime) -> Steady | None:
        """The memo of a running or booting job that may be kept without building its view (the
        caller then compares its attempt rows by identity, instances and agent statuses by value,
        ``kept_unviewed``): billing checked with nothing to correct, no gate possible
        (``Steady.quick``), the same job row, offers list, catalog read and context; booting, before
        its boot deadline and with its agent start gone through (``unchanged``)."""
        memo = self._memo.get(job_id)
        if memo is None or memo.job is not job or not memo.billed or memo.quick is None \
                or memo.quick[0] is not offers or memo.quick[1] != seen_at or not same_context(memo.context, context) \
                or (memo.attempt is None and not _boot_holds(memo, job_id, now, self.started)):
            return None
        return memo

    def renew(self, view: JobView, memo: Steady, billed_at: datetime | None,
              quick: tuple[object, object] | None) -> None:
        """A memo kept by ``unchanged`` this pass, brought up to date: its billing checked again
        (``billed_at``, None: not checked) and this pass's ``quick`` (a catalog read since, or
        billing that had future times then, would otherwise keep it off ``held`` for good)."""
        billed = memo.billed or (billed_at is not None and past(view, billed_at))
        was = memo.quick  # compared by identity: an offers list is never compared element by element
        if billed != memo.billed or not (was is quick or (was is not None and quick is not None
                                                           and was[0] is quick[0] and was[1] == quick[1])):
            self._memo[view.job.id or 0] = replace(memo, billed=billed, quick=quick)

    def note(self, view: JobView, d: Decision, context: tuple[object, ...], now: datetime | None = None,
             quick: tuple[object, object] | None = None) -> None:
        """Remember ``d`` for ``view``'s job if it was steady and clock free; else forget the job.
        ``now``: the time its billing was checked this pass (None: not checked). ``quick``: the pass's
        (offers, seen_at) if no gate can apply to the job (``held``)."""
        job_id = view.job.id or 0
        number, boot = steady_attempt(d), None
        if number is None:
            boot = booting(view, d)
        if (number is not None or boot is not None) and clock_free(view):
            viewed, self._viewed = self._viewed, None
            seen = viewed[1] if viewed is not None and viewed[0] is view else _seen(view)
            billed = now is not None and past(view, now)
            keys = tuple((a.row.provider, a.row.number, a.row.status == AttemptStatus.ENDED) for a in view.attempts)
            until = None
            if boot is not None and boot[2] is not None:
                until = boot[2] + timedelta(seconds=self.boot_timeout_s())
            self._memo[job_id] = Steady(view.job, seen, context, number, d.requeue_after, billed, boot, quick,
                                        keys, until)
        else:
            self._viewed = None
            self._memo.pop(job_id, None)

    def forget(self, held: set[int | None]) -> None:
        """Drop the jobs this daemon does not hold any more."""
        if not self._memo.keys() <= held:  # a subset test most passes; rebuilt only when a job left
            self._memo = {k: v for k, v in self._memo.items() if k in held}


def kept_unviewed(memo: Steady, job_id: int, rows: Sequence[Attempt] | None,
                  observed: Mapping[tuple[str, int, int], Instance], ok: Container[str],
                  ask: Callable[[str, Instance | None], Provider | None], batched: Mapping[ReadKey, Read],
                  behind: bool = True) -> tuple[list[tuple[Attempt, Runner]], Current, tuple[Check, ...]] | None:
    """Whether a job whose memo may be kept unviewed (``SteadyJobs.held``) saw exactly what it saw
    then: the same attempt ``rows``, instances and listed-or-not (``ok``), and agent statuses of
    the same value in this pass's ``batched`` reads, as ``SteadyJobs.unchanged`` on the view the
    pass would build. Then (the runners that answered with something ``new`` to read, for the log and
    metrics, or all that answered when the job is ``behind`` on them; the running attempt's row and
    instance, for its heartbeat; what was compared, for ``QuietJobs``); else None (view it).
    ``ask``: the provider worth asking for an attempt's agent (``Reconciler._worth_asking``)."""
    seen = memo.attempts
    if rows is None or len(rows) != len(seen) or len(memo.keys) != len(seen):
        return None
    runners: list[tuple[Attempt, Runner]] = []
    current = None
    checks: list[Check] = []
    # the rows are the very objects the memo's keys were read from: no ORM attribute read here
    for row, (m_row, m_inst, m_value, m_reach, m_obs), (name, number, ended) in zip(rows, seen, memo.keys, strict=True):
        if row is not m_row:
            return None
        if ended:
            continue  # ENDED then, as now: seen as observed with nothing else
        inst = observed.get((name, job_id, number))
        if (inst is not m_inst and inst != m_inst) or (name in ok) != m_obs:  # an instance by value
            return None
        value, reachable, key = None, False, None
        if (provider := ask(name, inst)) is not None:
            assert inst is not None
            key = (name, job_id, number, inst.id)
            read = None if provider.capabilities.runners_may_block else batched.get(key)
            if read is None:  # read in the view (inline or off the pass): view it
                return None
            value, reachable = read.value, read.reachable
            if read.agent is not None and read.runner is not None and (read.new or behind):
                runners.append((row, read.runner))
        if not same_value(value, m_value) or reachable != m_reach:
            return None
        checks.append(((name, job_id, number), inst, key, value, reachable))
        if number == memo.attempt:
            current = (row, inst)
    return runners, current, tuple(checks)
