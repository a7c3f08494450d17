"""A capped sweep that names neither a last step nor a pruning rule (a plain sweep): which fresh
trials wait, by what a finished trial cost. Pure. (A sweep naming its last step: ``finish``.)"""

from __future__ import annotations

from collections.abc import Sequence

from gpuorch.sweeps.finish import RESUME_MARGIN, Unfinished, progressed


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
