"""Finish first: when a sweep names its trials' last step (``objective.max_step``), money goes to
the trials it can carry to the end. Pure.

Each unfinished trial's cost to finish is the steps it has left times the sweep's spend per step:
that of its finished trials (start-up and billing minimums included once), else pooled over the
trials that have done at least a tenth of ``max_step`` (the template is the same; the furthest
along weigh most). Before either exists nothing is held. Going through
the trials, running ones first, then held, then queued, each in id order, a trial whose finish
does not fit in the cap after the finishes of those before it is held (running: a clean stop
with its checkpoint, once past its runway; not running: it waits, and starts only with a 10%
margin), unless it is the first running one. So the budget
is not spread over more trials than it can finish, and a held trial resumes from its checkpoint
once the money it needs is known to be there (older trials finished, or a raised cap).

With a pruning rule, a trial the rule has not judged yet is not held (:func:`unjudged`): a fresh
one may start, since most trials end at the first rung, and a started one runs to that rung.
Holding it earlier would buy neither a pruning decision nor a finish: its spend is wasted unless
the money to resume it turns up (bench/sweep.py seed 1: two trials started before any estimate
existed, held five minutes later, below the rung, and never resumed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

EVIDENCE = 0.1  # share of max_step a running trial must have done before its rate counts
RESUME_MARGIN = 1.1  # a trial not running starts only if 10% more than its estimate fits


@dataclass(frozen=True)
class Unfinished:
    job_id: int
    running: bool
    held: bool
    step: float | None  # the latest step the trial reported
    cost: float  # USD spent on it so far


def finish_first(max_cost: float, spent: float, max_step: int, trials: Sequence[Unfinished],
                 finished: Sequence[Unfinished] = ()) -> dict[int, str]:
    """Job id -> why it waits: the trials the money cannot carry to ``max_step`` after the ones
    before them (see the module docstring); ``finished``: the sweep's succeeded trials, whose
    spend per step informs the estimate. Empty while nothing can be estimated."""
    done = [t for t in finished if t.step and t.step > 0 and t.cost > 0]
    ran = done or [t for t in trials if t.step and t.step >= max_step * EVIDENCE and t.cost > 0]
    if not ran:
        return {}
    rate = sum(t.cost for t in ran) / sum(t.step or 0.0 for t in ran)  # pooled: the furthest along weigh most
    order = sorted(trials, key=lambda t: (not t.running, not t.held, t.job_id))
    out: dict[int, str] = {}
    need, first = spent, True
    for t in order:
        step = t.step if t.step and t.step > 0 else 0.0
        left = max(0.0, max_step - step) * rate
        margin = 1.0 if t.running else RESUME_MARGIN  # a start must clearly fit: no hold, resume, hold again
        if need + left * margin > max_cost and not (first and t.running):
            out[t.job_id] = (f"held: the cap (${max_cost:.2f}) cannot also finish this trial (about ${left:.2f} more) "
                             "after the trials ahead of it; resumes from its checkpoint when it can")
        else:
            need += left
        first = first and not t.running
    return out


def first_rung(min_steps: int, first_steps: Iterable[int]) -> int | None:
    """The step of a pruning rule's first decision: its ``min_steps``, else (ASHA's default,
    :func:`gpuorch.sweeps.pruning.verdict`) the first step any trial reported, at least 1; None
    while nothing has been reported."""
    if min_steps > 0:
        return min_steps
    first = min(first_steps, default=None)
    return None if first is None else max(1, first)


def unjudged(trials: Sequence[Unfinished], rung: int | None) -> set[int]:
    """Job ids finish-first must not hold under a pruning rule: fresh trials (not running, not
    held, nothing reported) and running ones below the first ``rung`` (all running ones that have
    reported nothing, or every running one while no rung is known)."""
    out = set()
    for t in trials:
        fresh = not t.running and not t.held and not t.step
        below = t.running and (not t.step or rung is None or t.step < rung)
        if fresh or below:
            out.add(t.job_id)
    return out
