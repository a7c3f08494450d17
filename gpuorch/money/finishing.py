"""A running attempt that finishes on the money its stop would take (issue 35: no trial ends while
money that could still run it exists). Pure.

The caps stop an attempt once the scope's commitments, with it reserved to its decision point (the
horizon ``H = 2I + S`` past a look, ``gpuorch.money.caps``), would cross the cap. A trial at 90 % of
its last step with $0.027 left needs $0.016 to finish, but its next horizon reserves $0.028: it
was stopped, and its whole spend wasted (bench/sweep.py --small-cap seed 11). Where the job's end is
known (its last step, and its pace in this attempt: ``end_of``) and comes at least a look before
what the money left allows (``affordable_end``), it runs on.

Safe by the same bound: at each later look the running check fails again, and either the estimate
still fits, or the attempt is stopped cleanly with the drain the money left allows (``with_drain``:
less than its grace once it ran on), or, with no time left for a final checkpoint, terminated at
once (it resumes from its last periodic one). None bills past ``affordable_end``: terminated at a
look, billing ends there, and a look is at most ``I`` after the one that let it run on, whose
estimate plus ``I`` fitted. Any other scope's check counts this attempt at its whole horizon, more
than it may take now, or as stopped now (a newer job's), more than terminating it now costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gpuorch.clock import aware
from gpuorch.money.caps import EPS, Gate, reservation, stoppable
from gpuorch.money.cost import attempt_cost, projected_cost

SLOW = 1.1  # the steps left may go a tenth slower than this attempt's pace so far
PRECISION_S = 0.001  # bisection's: a stop's drain is shortened only past it


def end_of(points: Sequence[tuple[int, float, float]], last_step: int, since: datetime | None,
           exit_s: float) -> datetime | None:
    """When a job reporting ``points`` (step, value, epoch seconds read) should exit: its latest
    step read, plus the steps left to ``last_step`` at this attempt's pace (reads since ``since``,
    its launch) a tenth slower, plus ``exit_s`` (the last checkpoint sync before it reports its
    exit: its longest upload). None while this attempt has read fewer than two steps, or a step
    past ``last_step`` (the last step is not what this job runs to)."""
    if (start := aware(since)) is None:
        return None
    t0 = start.timestamp()
    mine = sorted((p for p in points if p[2] >= t0), key=lambda p: p[2])
    if len(mine) < 2 or mine[-1][0] <= mine[0][0] or mine[-1][0] > last_step:
        return None
    first, latest = mine[0], mine[-1]
    pace = (latest[2] - first[2]) / (latest[0] - first[0])
    return datetime.fromtimestamp(latest[2] + (last_step - latest[0]) * pace * SLOW + exit_s, UTC)


def over(gate: Gate) -> bool:
    """Whether the gate's stop is the running check's (a scope over its cap now)."""
    return gate.stop is not None and any(not c.within(gate.policy, gate.now) for c in gate.caps)


def affordable_end(gate: Gate, job_id: int) -> datetime | None:
    """The latest time the job's running attempt may be billed to with every scope of the gate
    within its cap, the others counted as the one rule counts them (``Cap.within``); None: the job
    has no running attempt. At most its horizon past now (beyond it, the usual check passes)."""
    now, ends = gate.now, []
    for cap in gate.caps:
        mine = [(a, p) for a, p in cap.totals.live if a.job_id == job_id and stoppable(a)]
        if not mine:
            return None
        a, policy = mine[-1]
        at = max(now, cap.totals.promised(now))
        left = cap.limit + EPS - (cap.totals.committed_for(job_id, at, now) - reservation(a, now, policy, at=at))
        lo, hi = now, now + timedelta(seconds=policy.horizon_s)
        if projected_cost(a, hi, now) - attempt_cost(a, now) <= left:
            ends.append(hi)
            continue
        while (hi - lo).total_seconds() > PRECISION_S:  # billing is monotone in time: bisect
            mid = lo + (hi - lo) / 2
            lo, hi = (mid, hi) if projected_cost(a, mid, now) - attempt_cost(a, now) <= left else (lo, mid)
        ends.append(lo)
    return min(ends, default=None)


def runs_on(gate: Gate, job_id: int, end: datetime | None) -> bool:
    """Whether the job's attempt, stopped by the running check, runs on to its estimated ``end``:
    not past, and seen ended by the look after it (``I``) before what the money allows."""
    until = affordable_end(gate, job_id)
    step = timedelta(seconds=gate.policy.decision_interval_s)
    return end is not None and until is not None and gate.now <= end and end + step <= until


def with_drain(gate: Gate, job_id: int) -> Gate:
    """The gate, its stop grace the drain a clean stop of the job's attempt gets: its own, or what
    the money allows, a look (``I``) before ``affordable_end`` (less only after it ran on); 0:
    terminate it now (``reconciler.decide.gates.stop_running``)."""
    until, grace = affordable_end(gate, job_id), gate.policy.stop_grace_s
    left = grace if until is None else (until - gate.now).total_seconds() - gate.policy.decision_interval_s
    if left >= grace - 2 * PRECISION_S:
        return gate
    return replace(gate, policy=replace(gate.policy, stop_grace_s=max(0.0, left)))
