"""A capped sweep that names neither a last step nor a pruning rule (a plain sweep): which fresh
trials wait, for the money a finished trial's cost says they need (``fund_fresh``), or for the
trial ahead of them where the money, not the deadline, limits the sweep (``in_turn``). Pure. (A
sweep naming its last step: ``finish``.)"""

from __future__ import annotations

from collections.abc import Sequence

from gpuorch.sweeps.finish import AFTER_TURN, IN_TURN, RESUME_MARGIN, Unfinished, Warm, progressed


def fund_fresh(max_cost: float, spent: float, trials: Sequence[Unfinished], finished: Sequence[float],
               scope: str = "sweep budget") -> dict[int, str]:
    """A capped sweep that names no last step and no pruning rule: job id -> why a fresh trial
    (not running, not held, nothing reported or spent) waits. Once trials have finished, a trial's
    cost is known (``finished``: what each cost, start-up and billing minimums included), and a
    fresh one starts only if that cost fits in the cap after what the trials ahead of it still
    need (each the same cost less what it spent, at least nothing), with the 10% margin unless
    nothing is ahead. Running and resumable trials are the caps' to stop and hold; this only keeps
    the sweep from starting a trial the money cannot carry to its end, which would be held, or
    ended, with its spend wasted (bench/sweep.py --small-cap: a fourth trial started on the last
    $0.07 of a cap whose trials cost $0.19 each). Empty before any trial has finished. ``scope``:
    the cap's name in the messages."""
    if not finished:
        return {}
    per = sum(finished) / len(finished)
    order = sorted(trials, key=lambda t: (not t.running, not (t.held or progressed(t) or t.cost > 0), t.job_id))
    need, out = spent, {}
    for t in order:
        fresh = not t.running and not t.held and not progressed(t) and t.cost <= 0
        margin = 1.0 if need <= spent else RESUME_MARGIN
        if fresh and need + per * margin > max_cost:
            out[t.job_id] = (f"waiting: a trial of this sweep costs about ${per:.2f} (its finished trials'); the "
                             f"{scope} (${max_cost:.2f}, ${spent:.2f} spent) cannot also carry this one to its end "
                             f"after the ${need - spent:.2f} the trials ahead still need; starts if money comes back")
        else:
            need += max(0.0, per - t.cost)
    return out


def in_turn(max_cost: float, spent: float, trials: Sequence[Unfinished], finished: Sequence[float], warm: Warm,
            time_left_s: float | None, scope: str = "sweep budget") -> dict[int, str]:
    """Job id -> why a fresh trial of a plain capped sweep waits for the trial ahead of it to end
    instead of starting now: one trial at a time, each after the first on its predecessor's
    instance where trials keep theirs warm (``warm.keeps``: kept for it, ``finish.for_warm``).

    Where the money, not the deadline, limits the sweep, running trials at once buys nothing the
    cap lets the sweep use: each pays a boot, trials at once are preempted together in one market,
    and before a trial has finished what one costs is not known, so the ones started together are
    started blind (bench/sweep.py --small-cap seed 21: a second trial booted five minutes after
    the first, in its zone, both lost there without notice; then three at once, the third held
    for good, 23 % of the spend wasted). The deadline does not need trials at once where twice the
    time the money left buys on one instance, at the lowest price a trial pays or would, is before
    it; a sweep without one has said nothing of its time, and runs ``max_parallel`` at once. The
    money limits the sweep where it funds fewer whole trials (``finished``: what each cost) than
    are fresh, after what the trials ahead still need; before any trial has finished, it may. A
    trial is ahead while it runs, or waits to start again (progress or spend, not held), and so is
    a warm instance of the sweep being readied (kept for the trial that waits); as many fresh
    trials as the sweep has idle warm instances start (on them), else, with none ahead, the first.
    Trials ``fund_fresh`` holds are counted as fresh (the caller keeps
    its reasons)."""
    fresh = sorted(t.job_id for t in trials if not (t.running or t.held or progressed(t)) and t.cost <= 0)
    prices = [t.price for t in trials if t.price]
    money = max(0.0, max_cost - spent)
    if not fresh or not prices or time_left_s is None or 2 * money * 3600 / min(prices) > time_left_s:
        return {}
    if finished:
        per = sum(finished) / len(finished)
        funds = int(max(0.0, money - sum(max(0.0, per - t.cost) for t in trials if t.job_id not in fresh)) // per)
        if funds >= len(fresh):
            return {}
        why = f"the {scope} funds about {funds} more trial{'s' if funds != 1 else ''}, fewer than are left"
    else:
        why = f"what a trial costs is not known before one finishes, and the ${money:.2f} left is paid on one instance"
    ahead = warm.readying or any(t.running or not t.held and (progressed(t) or t.cost > 0) for t in trials)
    starts = len(warm.idle) or (0 if ahead else 1)  # on the idle warm instances, else the first if none is ahead
    then = IN_TURN if warm.keeps else AFTER_TURN
    why = f"waiting: {why}; the deadline leaves time to run trials one after another{then}"
    return {j: why for j in fresh[starts:]}
