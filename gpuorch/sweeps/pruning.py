"""Early stopping of sweep trials: the median stopping rule and successive halving (ASHA) over the
objective's values by step, decided by Optuna's pruners. Pure: histories in, a verdict out.

Optuna's pruners are the well-kept, widely used implementations of both rules (the median rule
of Google Vizier, and the asynchronous successive halving of Li et al.), so gpuorch does not keep
its own. gpuorch trials are not Optuna trials: for each decision an in-memory study is rebuilt
from the stored histories (``Job.objective_history``: step, value and when the daemon read it),
every trial's reports replayed in the order they arrived, each followed by ``should_prune`` (so
ASHA records the value each trial had at each rung, against what was known then, and an early
promotion is never revisited). A finished trial is told ``COMPLETE`` after its last report, a
pruned one ``PRUNED``. The verdict is the pruner's answer on the trial in question. Optuna is imported only here, and
only when a sweep names a pruning rule.

- ``median``: prune at step s when the trial's value is worse than the median of finished
  trials' values at s (``min_trials`` finished first; no decision before ``min_steps``).
- ``asha``: rungs at ``min_steps x reduction_factor^k`` (``min_steps`` default: the first step
  any trial reported); at each rung a trial goes on only if its value is in the best
  ``1 / reduction_factor`` of the values recorded at that rung (the first trials there go on
  only if best so far, as Optuna does).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Point = tuple[int, float, float]  # (step, value, epoch seconds when read)
MAX_POINTS = 2000  # per trial; older points are dropped first


@dataclass(frozen=True)
class TrialHistory:
    id: int
    state: Literal["finished", "pruned", "running"]
    points: tuple[Point, ...]


def parse_history(text: str | None) -> tuple[Point, ...]:
    if not text:
        return ()
    return tuple((int(p[0]), float(p[1]), float(p[2])) for p in json.loads(text))


def extend_history(text: str | None, new: Sequence[tuple[int, float]], at: float) -> str | None:
    """``text`` (the JSON history) with ``new`` (step, value) points read at ``at``; a step
    reported again (a trial resumed from an earlier checkpoint) keeps its first value. None if
    nothing changed."""
    old = parse_history(text)
    seen = {p[0] for p in old}
    add = [(s, v, at) for s, v in new if s not in seen and not seen.add(s)]  # type: ignore[func-returns-value]
    if not add:
        return None
    points = sorted(old + tuple(add), key=lambda p: (p[2], p[0]))[-MAX_POINTS:]
    return json.dumps([list(p) for p in points])


def _pruner(rule: str, min_steps: int, min_trials: int, reduction_factor: int) -> Any:
    from optuna.pruners import MedianPruner, SuccessiveHalvingPruner

    if rule == "median":
        return MedianPruner(n_startup_trials=min_trials, n_warmup_steps=min_steps, interval_steps=1)
    return SuccessiveHalvingPruner(min_resource=max(1, min_steps), reduction_factor=reduction_factor,
                                   min_early_stopping_rate=0)


def verdict(rule: str, mode: str, trial: TrialHistory, others: Sequence[TrialHistory], *, min_steps: int = 0,
            min_trials: int = 1, reduction_factor: int = 3) -> str | None:
    """Why ``trial`` should stop now by ``rule`` (``median`` or ``asha``) given every other
    trial's history; None: it goes on (or has reported nothing yet)."""
    if not trial.points:
        return None
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if rule == "asha" and min_steps <= 0:
        min_steps = min(h.points[0][0] for h in (trial, *others) if h.points)
    study = optuna.create_study(direction="minimize" if mode == "min" else "maximize",
                                pruner=_pruner(rule, min_steps, min_trials, reduction_factor))
    everyone = sorted((trial, *others), key=lambda h: h.id)
    asked = {h.id: study.ask() for h in everyone}
    events = sorted((p[2], h.id, p[0], p[1], i == len(h.points) - 1)
                    for h in everyone for i, p in enumerate(h.points))
    state = {h.id: h.state for h in everyone}
    found: str | None = None
    for _, hid, step, value, last in events:
        t = asked[hid]
        t.report(value, step)
        pruned = t.should_prune()  # for every trial: ASHA records its rung values
        if hid == trial.id and pruned and found is None:
            what = "the median stopping rule" if rule == "median" else "successive halving (ASHA)"
            found = f"pruned by {what} at step {step} (value {value:.6g})"
        if last and state[hid] == "finished":
            study.tell(t, value)
        elif last and state[hid] == "pruned":
            study.tell(t, state=TrialState.PRUNED)
    return found
