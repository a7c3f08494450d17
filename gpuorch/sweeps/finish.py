"""Finish first: when a sweep names its trials' last step (``objective.max_step``), money goes to
the trials it can carry to the end. Pure.

Each unfinished trial's cost to finish is the steps it has left times the sweep's cost of a step,
plus a start if it is not running (:func:`estimate`: the time a step and a start took, read when
each step was read, pooled over the trials that have done at least a tenth of ``max_step`` or
read two steps within one attempt, at the price the trial pays now or its next start would pay;
the template is the same). Before such a trial exists nothing is held, and fresh trials wait
while one ahead has reported steps (:func:`unestimated`: the evidence is a report away). Going
through the trials, running ones first, then those with progress (held, or queued after a
preemption), then fresh ones, each in id order, a trial whose finish does not fit in the cap
after the finishes of those before it is held (running: a clean stop with its checkpoint, once
past its runway; not running: it waits, and starts only with a 10% margin, or when no trial is
ahead of it with one more start should it be preempted on spot, and either way the caps' last
horizon: :func:`_cushion`), unless it is the first running one. A fresh trial must also leave the
trials ahead their resume margin (a spot trial ahead that is preempted needs it to start again).
So the budget is not spread over more trials than it can finish, and a held trial resumes from
its checkpoint once the money it needs is known to be there (older trials finished, or a raised
cap).

With a pruning rule, a running trial the rule has not judged yet (below the first rung) is not
held: it runs to that rung, since most trials end there, and holding it earlier buys neither a
pruning decision nor a finish (bench/sweep.py seed 1: two trials held five minutes after their
start, below the rung, never resumed). A fresh trial needs the money to reach the first
rung after the finishes of the trials ahead of it: letting fresh trials start regardless
spends what those need (seed 3: seven fresh trials pruned at the rung while the leader, preempted
at step 450, was left without the money to finish). It also needs the money to finish, should
the rule let it past the rung, after those ahead (the ones below the rung counted to it): the
trials the rule lets through are the best ones, and one the cap cannot finish is held there for
good, its spend lost (seeds 0-2: the best learning rate, twice a night, 13-15 % of the spend
wasted). A trial with progress that is not running (held, or queued after a preemption) goes
before fresh ones, whatever its status; held only for its resume margin (its finish fits, the
margin not), its money stays its own: fresh trials do not start on it (seed 0: they did, and
the $0.47 of a trial preempted at step 250 went for nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

EVIDENCE = 0.1  # share of max_step a running trial must have done before its rate counts, unless timed
RESUME_MARGIN = 1.1  # a trial not running starts only if 10% more than its estimate fits
FOR_WARM = "; this trial starts there sooner than a boot would finish, and without paying one"
IN_TURN = "; this trial starts on a running trial's instance when it ends, without paying a boot"
AFTER_TURN = "; this trial starts when the trial ahead of it ends"  # in turn, where the sweep keeps none warm


def for_warm(why: str) -> bool:
    """Whether a trial waits (``finish_first``'s reason) for a warm instance of its sweep: the
    instance, once ready, is kept for it (``reconciler/apply/warm``), not released as unwanted."""
    return why.endswith((FOR_WARM, IN_TURN))


@dataclass(frozen=True)
class Unfinished:
    job_id: int
    running: bool
    held: bool
    step: float | None  # the latest step the trial reported
    cost: float  # USD spent on it so far
    # (first step, spend when it was read, latest step, spend when it was read): what its steps
    # cost, read against the spend at each report (None: no history; the pooled cost / step then)
    span: tuple[float, float, float, float] | None = None
    # (steps, USD) between two reads within one attempt (its widest such): the work, without the
    # restarts (None: no such pair; the span is used)
    work: tuple[float, float] | None = None
    lag: float = 0.0  # USD spent since its latest step was read: steps it has done, not reported yet
    # The time its steps took, for an estimate at the price it pays now (``price``): the billed
    # seconds of its ``work`` pair, and over its attempts when its first step was read
    work_s: float | None = None
    first_s: float | None = None
    price: float | None = None  # USD/h its attempt pays now (running), else what its next start would pay


@dataclass(frozen=True)
class Estimate:
    """The sweep's cost of a step, and of a start (boot, restore, the time to the first report):
    what a trial not running pays again before its steps count."""

    per_step: float
    start: float = 0.0
    step_s: float | None = None  # billed seconds a step takes (None: not known; ``per_step`` then)
    start_s: float = 0.0  # billed seconds of a start

    def rates(self, t: Unfinished) -> tuple[float, float]:
        """USD of a step and of a start for ``t``: the time they take at the price ``t`` pays now
        (running) or would pay on its next start, where both are known; else the sweep's spend."""
        if self.step_s is None or t.price is None:
            return self.per_step, self.start
        return self.step_s * t.price / 3600, self.start_s * t.price / 3600

    def left(self, t: Unfinished, target: float, *, warm: bool = False) -> float:
        """USD to take ``t`` from its step to ``target``: a running trial has already paid for the
        steps since its latest report (``lag``); one not running pays a start first, unless it
        starts on a ``warm`` instance (booted and set up)."""
        step = t.step if t.step and t.step > 0 else 0.0
        per_step, start = self.rates(t)
        if t.running:
            return max(0.0, (target - step) * per_step - t.lag)
        return (0.0 if warm else start) + max(0.0, target - step) * per_step

    def ends_within_start(self, t: Unfinished, max_step: float) -> float | None:
        """Seconds until running ``t`` reaches ``max_step``, if that is sooner than a start takes
        (None otherwise, or where the times or its price are not known)."""
        if not t.running or self.step_s is None or not t.price or self.start_s <= 0:
            return None
        secs = self.left(t, max_step) * 3600 / t.price
        return secs if secs < self.start_s else None


@dataclass(frozen=True)
class Warm:
    """The sweep's warm capacity (``keep_warm``) that trials not running can start on without a
    start: the USD/h of its ``idle`` warm instances (cheapest first) and of those being made ready
    (``readying``); ``keeps``: whether a trial that ends leaves its instance warm."""

    idle: tuple[float, ...] = ()
    readying: tuple[float, ...] = ()
    keeps: bool = False


def estimate(max_step: int, trials: Sequence[Unfinished], finished: Sequence[Unfinished] = ()) -> Estimate | None:
    """What a step and a start cost in this sweep; None while nothing can be estimated.

    Read against the spend when each step was read (``Unfinished.span``, ``work``), over the
    trials that have reported twice and done a tenth of ``max_step`` (or read two steps within one
    attempt: timed, ``work_s``), pooled (the furthest along
    weigh most): a step costs the spend between two reads within one attempt over the steps
    between them (else between the trial's first and latest reads), a start what the first read
    cost beyond its steps. Not the spend now over the latest step: steps are reported every few
    minutes while the spend grows by the second, so that ratio ran up to half again too high
    just after a report (bench/sweep.py seeds 0-1: the best trial, let through at the rung, was
    held for good, $1.33 for a $1.01 finish), and it counted the start again in the steps a
    running trial has left (--small-cap: a third trial held at its boot). Not across attempts
    either: two trials preempted early (seed 1, step 100 of 700) put a restart in every hundred
    steps of the estimate and held the second for good, though it fitted. A preemption costs
    what the margins and the caps then see; a start is counted once per trial not running.
    Without spans (no history): the finished trials' spend over their steps, else that of the
    trials with a tenth of ``max_step`` done."""
    ran = [t for t in (*finished, *trials) if t.span and (t.span[2] >= max_step * EVIDENCE or _clocked(t))
           and t.span[2] > t.span[0] and t.span[3] > t.span[1]]
    if ran:
        works = [t.work if t.work and t.work[0] > 0 and t.work[1] > 0
                 else (t.span[2] - t.span[0], t.span[3] - t.span[1]) for t in ran if t.span]
        per = sum(c for _, c in works) / sum(n for n, _ in works)
        start = sum(max(0.0, t.span[1] - per * t.span[0]) for t in ran if t.span) / len(ran)
        return Estimate(per, start, *_timed(ran))
    done = [t for t in finished if t.step and t.step > 0 and t.cost > 0]
    ran = done or [t for t in trials if t.step and t.step >= max_step * EVIDENCE and t.cost > 0]
    if not ran:
        return None
    return Estimate(sum(t.cost for t in ran) / sum(t.step or 0.0 for t in ran))


def _clocked(t: Unfinished) -> bool:
    """Whether ``t``'s steps were timed within one attempt: two reads give what a step takes, at
    any share of ``max_step`` (a start is apart), so the estimate need not wait for a tenth of it
    (a long trial's tenth is hours, which fresh trials would wait: :func:`unestimated`)."""
    return bool(t.work and t.work[0] > 0 and t.work[1] > 0 and t.work_s and t.work_s > 0)


def _timed(ran: Sequence[Unfinished]) -> tuple[float | None, float]:
    """Seconds of a step and of a start, pooled as :func:`estimate` pools their cost, over the
    trials of ``ran`` whose times are known ((None, 0.0) if none): a price moves between markets
    and within one, the time a step takes does not."""
    timed = [t for t in ran if _clocked(t)]
    if not timed:
        return None, 0.0
    step_s = sum(t.work_s or 0.0 for t in timed) / sum(t.work[0] for t in timed if t.work)
    starts = [max(0.0, t.first_s - step_s * t.span[0]) for t in ran if t.first_s is not None and t.span]
    return step_s, sum(starts) / len(starts) if starts else 0.0


def finish_first(max_cost: float, spent: float, max_step: int, trials: Sequence[Unfinished],
                 finished: Sequence[Unfinished] = (), *, pruning: bool = False,
                 rung: int | None = None, pruned: Sequence[float] = (), warm: Warm | None = None,
                 horizon_s: float = 0.0, spot: bool = False, time_left_s: float | None = None) -> dict[int, str]:
    """Job id -> why it waits: the trials the money cannot carry to ``max_step`` after the ones
    before them (see the module docstring); ``finished``: the sweep's succeeded trials, whose
    spend per step informs the estimate. Empty while nothing can be estimated. With ``pruning``
    (first decision at ``rung``; None: none known yet), a running trial below the rung is never
    held and counts the money to the rung, and a fresh one needs that money (at least what the
    sweep's ``pruned`` trials spent each on average, start-up and final checkpoint included, or
    the steps to the rung at the sweep's rate) and, if let past the rung, the money to finish.
    ``warm``: the sweep's warm capacity. A trial not running that an idle warm instance of the
    sweep can take is estimated without a start, at that instance's price; one that an instance
    being readied, or a running trial ending sooner than a start takes, would free waits for it:
    it starts sooner than a boot would finish, and pays none (--small-cap seed 11: a third trial started
    cold 18 s before the first's instance came free, held at step 10 for want of about its boot's
    cost). ``horizon_s``: the caps' reservation of a running attempt (``money.caps``: ``H``); ``spot``:
    trials may run on spot (a trial's cushion: :func:`_cushion`); ``time_left_s``: to the deadline."""
    est = estimate(max_step, trials, finished)
    if est is None:
        return unestimated(max_step, trials)
    order = sorted(trials, key=lambda t: (not t.running, not (t.held or progressed(t)), t.job_id))
    early = unjudged(trials, rung) if pruning else set()
    out: dict[int, str] = {}
    # need: what the trials let through will spend; reserve: the same at their resume margin, what
    # a fresh trial must leave them (a spot trial ahead that is preempted resumes only with it)
    need = reserve = spent
    first = True  # nothing counted ahead yet
    slots = _slots(est, order, warm or Warm(), max_step)
    for t in order:
        to_rung = t.job_id in early and rung is not None
        target = rung if to_rung and rung is not None else max_step
        slot = slots[0] if slots and not t.running else None
        t, left, on_warm = _priced(est, t, target, slot)
        if to_rung and pruned:  # what getting to a rung cost the trials that ended there
            left = max(left, sum(pruned) / len(pruned) - t.cost)
        fresh = not t.running and not t.held and not progressed(t)
        free = (first and t.running) or (t.job_id in early and (t.running or rung is None))
        why = None
        if (reserve if fresh else need) + left + _cushion(est, t, left, first, spot, horizon_s) > max_cost and not free:
            what = f"take this trial to the first rung (step {rung})" if to_rung else "finish this trial"
            why = f"cannot also {what} (about ${left:.2f} more)"
        elif fresh and to_rung and need + (whole := est.left(t, max_step, warm=on_warm)) + _cushion(
                est, t, 0.0, first, spot, horizon_s) > max_cost:  # its horizon, and with none ahead a start more
            why = f"could not also finish this trial (about ${whole:.2f}) if the rule let it past the first rung"
        if why is None:
            if fresh and not on_warm and not pruning and (
                    turn := in_turn(est, t, order, max_cost - need, max_step, warm or Warm(), time_left_s)):
                out[t.job_id] = turn
            need, reserve, first = need + left, reserve + left * RESUME_MARGIN, False
            if on_warm and slot is not None:
                slots.pop(0)
                if slot[1] is not None:
                    out[t.job_id] = f"waiting: {slot[1]}, kept warm{FOR_WARM}"
            continue
        out[t.job_id] = (f"held: the cap (${max_cost:.2f}) {why} after the trials ahead of it; resumes from its "
                         "checkpoint when it can")
        if not fresh and need + left <= max_cost:  # held for its margin only: the money stays its own
            need, reserve = need + left, reserve + left * RESUME_MARGIN
    return out


def in_turn(est: Estimate, t: Unfinished, order: Sequence[Unfinished], money: float, max_step: int,
            warm: Warm, time_left_s: float | None) -> str | None:
    """Why fresh ``t``, which the ``money`` left after the trials ahead funds, waits to start on
    the instance of a running trial of the sweep when it ends, kept warm for it, instead of
    booting one now (None: it boots). Where the money, not the deadline, limits the sweep (it
    funds fewer whole trials than the fresh ones left in ``order``, this one included, and twice the time
    to run those it funds one after another, after the running ones, is before the deadline),
    running more at once buys nothing the cap lets the sweep use, and each boots an instance and
    is preempted with the others of its market: --small-cap seed 21, a second trial booted five
    minutes after the first in its zone, both lost there, and the $0.04 it cost was the third
    trial's margin; run in turn, seeds 3 and 21 finish three. Only while a trial runs, where the
    time a step takes is known, and under a deadline (a sweep without one runs ``max_parallel`` at
    once). A sweep that keeps no instance warm (``keep_warm: 0s``) waits the same, and boots when
    the trial ahead ends."""
    running = [x for x in order if x.running]
    whole = est.left(t, max_step)
    if not running or est.step_s is None or whole <= 0:
        return None
    funds = int(max(0.0, money) // whole)
    at = [x.job_id for x in order].index(t.job_id)
    fresh = sum(1 for x in order[at:] if not (x.running or x.held or progressed(x)))
    ahead_s = max((max_step - (x.step or 0.0)) * est.step_s for x in running)
    serial_s = ahead_s + funds * (max_step * est.step_s + est.start_s)
    if funds >= fresh or time_left_s is None or 2 * serial_s > time_left_s:
        return None
    return (f"waiting: the cap funds about {funds} more trial{'s' if funds != 1 else ''} and the deadline leaves time "
            f"to run them one after another{IN_TURN if warm.keeps else AFTER_TURN}")


def _slots(est: Estimate, order: Sequence[Unfinished], warm: Warm, max_step: int) -> list[tuple[float, str | None]]:
    """Where trials not running may start warm, in turn: (USD/h, what they wait for; None: an
    idle instance, nothing)."""
    slots: list[tuple[float, str | None]] = [(p, None) for p in warm.idle]
    slots += [(p, "a warm instance of this sweep is being made ready") for p in warm.readying]
    slots += [(t.price, f"trial {t.job_id} ends in about {secs:.0f} s") for t in order
              if warm.keeps and t.price and (secs := est.ends_within_start(t, max_step)) is not None]
    return slots


def _priced(est: Estimate, t: Unfinished, target: float,
            slot: tuple[float, str | None] | None) -> tuple[Unfinished, float, bool]:
    """``t`` (at the warm instance's price if it starts there), USD to take it to ``target``, and
    whether it starts on ``slot``: where that costs less than a start at the next start's price
    (which may be cheaper than the warm instance's)."""
    left = est.left(t, target)
    if slot is None:
        return t, left, False
    warm = replace(t, price=slot[0])
    w = est.left(warm, target, warm=True)
    return (warm, w, True) if w < left else (t, left, False)


def _cushion(est: Estimate, t: Unfinished, left: float, first: bool, spot: bool, horizon_s: float) -> float:
    """USD a trial must leave beyond its ``left`` to be let start or run on (``finish_first``).

    Running: nothing (the caps stop it at the edge if need be; a hold now costs a restart for
    sure: main night seed 1, a trial held so at step 250 resumed later and was stopped at step 650
    of 700, where run on it finished). Not running, with trials ahead: the 10 % margin a start
    needs to clearly fit (no hold, resume, hold again), and at least its last horizon
    (``horizon_s`` at its price: the running check keeps it reserved to the last look, then gives
    it back). With none ahead: a fresh trial, the horizon and on ``spot`` one more start, the one a
    preemption costs (main night seed 4: a second trial started with $0.017 to spare was preempted
    at step 550 and could not start again, its $0.89 wasted); one with progress, nothing: resuming
    is the only use of what it spent (--small-cap seed 2: a trial preempted at step 60, $0.08 from
    its end with $0.09 left, was held for good with a cushion, its $0.12 wasted)."""
    if first:
        if t.running or progressed(t):
            return 0.0
        return _tail(t, horizon_s) + (est.rates(t)[1] if spot else 0.0)
    if t.running:
        return 0.0
    return max(left * (RESUME_MARGIN - 1), _tail(t, horizon_s))


def _tail(t: Unfinished, horizon_s: float) -> float:
    """USD of the caps' horizon at ``t``'s price: reserved to its last look, then given back."""
    return horizon_s * (t.price or 0.0) / 3600


def unestimated(max_step: int, trials: Sequence[Unfinished]) -> dict[int, str]:
    """Before a finish can be estimated: job id -> why a fresh trial waits while a trial ahead of
    it has reported steps and is on its way to the evidence (two reads within one attempt). Its
    spend would be committed blind: on bench/sweep.py seed 4 a trial started then was let
    through the rung and held there for good, the cap unable to finish it after the leader. The
    evidence is one report away; while no trial has reported a step (nothing says one will), or
    once none is ahead, a fresh one starts."""
    ahead = [t.job_id for t in trials if progressed(t)]
    if not ahead:
        return {}
    why = (f"waiting: what a finish costs is not known yet (trial {min(ahead)} of the sweep has not reported "
           f"enough of its {max_step} steps); starts once it can be estimated")
    return {t.job_id: why for t in trials if not (t.running or t.held or progressed(t))}


def progressed(t: Unfinished) -> bool:
    """A trial that has reported a step: one not running resumes from its checkpoint."""
    return bool(t.step and t.step > 0)


def first_rung(min_steps: int, first_steps: Iterable[int]) -> int | None:
    """The step of a pruning rule's first decision: its ``min_steps``, else (ASHA's default,
    :func:`gpuorch.sweeps.pruning.verdict`) the first step any trial reported, at least 1; None
    while nothing has been reported."""
    if min_steps > 0:
        return min_steps
    first = min(first_steps, default=None)
    return None if first is None else max(1, first)


def unjudged(trials: Sequence[Unfinished], rung: int | None) -> set[int]:
    """Job ids the pruning rule has not judged yet: fresh trials (not running, not held, nothing
    reported), which finish-first takes to the first ``rung`` only, and running ones below it (all
    running ones that have reported nothing, or every running one while no rung is known), which
    it never holds."""
    out = set()
    for t in trials:
        fresh = not t.running and not t.held and not t.step
        below = t.running and (not t.step or rung is None or t.step < rung)
        if fresh or below:
            out.add(t.job_id)
    return out

