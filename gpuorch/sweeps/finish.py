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
"""

from __future__ import annotations

from collections.abc import Sequence
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
