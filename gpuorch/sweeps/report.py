"""``gpuorch sweep status``: the morning table. Each trial's parameters, latest metrics, runtime,
attempts, preemptions, cost and state; the best trial among the finished ones (or the best
unfinished one, flagged with its step); and the spend split by what it bought. Read-only.

Spend per attempt, by use (the footer, ``spend``):

- ``finished`` / ``pruned``: attempts of trials that succeeded / were pruned, each of which
  either ended the trial or left a checkpoint a later attempt resumed from;
- ``held``: the latest attempt of a trial that is held or queued again, stopped with a
  checkpoint that its next attempt will resume from, and any used attempt before it;
- ``running``: live attempts;
- ``unfinished``: attempts whose checkpoint a later attempt resumed from, of trials that then
  stopped unfinished (budget, deadline, cancel, failure);
- ``wasted``: attempts stopped with no use: no finished result, no pruning decision, and no
  checkpoint that a later attempt resumed from;
- ``idle``: warm instances' idle time (spec ``keep_warm``), billed to the trial that left each
  warm (as the caps count it), also in that trial's ``cost`` (``idle_cost`` alone).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from gpuorch.jobs.counts import counts
from gpuorch.money.cost import attempt_cost
from gpuorch.store.models import (
    Attempt,
    AttemptStatus,
    Checkpoint,
    Job,
    JobStatus,
    Sweep,
    TerminationReason,
    WarmInstance,
)
from gpuorch.sweeps.intent import trials_of
from gpuorch.warm.ledger import idle_cost

BUCKETS = ("finished", "pruned", "held", "running", "unfinished", "wasted", "idle")


def _number(v: Any) -> float | None:
    return None if isinstance(v, bool) or not isinstance(v, int | float) else float(v)


def _order(mode: str) -> Callable[[dict[str, Any]], tuple[int, float, int]]:
    """Finished trials with a value first, best first; then unfinished ones with a value; then
    the rest by id."""
    def key(t: dict[str, Any]) -> tuple[int, float, int]:
        v = t["value"]
        if v is None:
            return (2, 0.0, t["id"])
        return (0 if t["status"] == JobStatus.SUCCEEDED.value else 1, v if mode == "min" else -v, t["id"])

    return key


def _uses(job: Job, rows: list[Attempt], made: dict[str, int]) -> list[str]:
    """The bucket of each of the trial's attempts (oldest first): see the module docstring."""
    resumed = {made[a.resumed_from] for a in rows if a.resumed_from and a.resumed_from in made}
    out = []
    for i, a in enumerate(rows):
        if a.status != AttemptStatus.ENDED:
            out.append("running")
            continue
        useful = a.reason in (TerminationReason.SUCCEEDED, TerminationReason.PRUNED) or a.number in resumed
        waiting = not job.status.terminal and i == len(rows) - 1 and a.last_checkpoint is not None
        if waiting:
            out.append("held")
        elif not useful:
            out.append("wasted")
        elif job.status == JobStatus.SUCCEEDED:
            out.append("finished")
        elif job.status == JobStatus.PRUNED:
            out.append("pruned")
        elif not job.status.terminal:
            out.append("held")
        else:
            out.append("unfinished")
    return out


def sweep_report(s: Session, sweep: Sweep, now: datetime) -> dict[str, Any]:
    jobs = trials_of(s, sweep.id or 0)
    ids = [j.id for j in jobs]
    rows: dict[int, list[Attempt]] = {}
    for a in s.exec(select(Attempt).where(col(Attempt.job_id).in_(ids)).order_by(col(Attempt.number))):
        rows.setdefault(a.job_id, []).append(a)
    made: dict[int, dict[str, int]] = {}
    for jid, name, attempt in s.exec(select(Checkpoint.job_id, Checkpoint.name, Checkpoint.attempt).where(
            col(Checkpoint.job_id).in_(ids))).all():
        made.setdefault(jid, {})[name] = attempt
    idle: dict[int, float] = {}  # trial id -> its warm instances' idle cost
    for w in s.exec(select(WarmInstance).where(col(WarmInstance.job_id).in_(ids))):
        idle[w.job_id] = idle.get(w.job_id, 0.0) + idle_cost(w, now)
    metric, mode = sweep.objective_metric, sweep.objective_mode
    source = (json.loads(sweep.spec).get("objective") or {}).get("source", "metrics") if metric else "metrics"
    spend = dict.fromkeys(BUCKETS, 0.0)
    trials = []
    for j in jobs:
        mine = rows.get(j.id or 0, [])
        costs = [attempt_cost(a, now) for a in mine]
        for use, c in zip(_uses(j, mine, made.get(j.id or 0, {})), costs, strict=True):
            spend[use] += c
        spend["idle"] += idle.get(j.id or 0, 0.0)
        metrics = json.loads(j.metrics) if j.metrics else {}
        result = json.loads(j.result) if j.result else None
        values = (result if isinstance(result, dict) else {}) if source == "result" else metrics
        trials.append({
            "id": j.id, "name": j.name, "status": j.status.value, "message": j.message,
            "params": json.loads(j.params) if j.params else {}, "metrics": metrics,
            "value": _number(values.get(metric)) if metric else None, "step": _number(metrics.get("step")),
            "cost": round(sum(costs) + idle.get(j.id or 0, 0.0), 6), "idle_cost": round(idle.get(j.id or 0, 0.0), 6),
            "attempts": len(mine), **counts(mine), "preemptions": j.preemptions,
            "runtime_s": round(sum(((a.ended_at or now) - a.launched_at).total_seconds()
                                   for a in mine if a.launched_at is not None), 1),
        })
    trials.sort(key=_order(mode))
    best = None
    if trials and trials[0]["value"] is not None:
        top = trials[0]
        best = {**top, "unfinished": top["status"] != JobStatus.SUCCEEDED.value}
    spent = sum(spend.values())
    left = round(max(0.0, sweep.max_cost - spent), 6) if sweep.max_cost is not None else None
    return {
        "id": sweep.id, "name": sweep.name, "status": sweep.status.value, "message": sweep.message,
        "spent": round(spent, 6), "max_cost": sweep.max_cost, "deadline": sweep.deadline,
        "max_parallel": sweep.max_parallel,
        "objective": {"metric": metric, "mode": mode, "source": source} if metric else None,
        "counts": dict(Counter(t["status"] for t in trials)), "best": best,
        "spend": {k: round(v, 6) for k, v in spend.items()},
        "wasted_share": round(spend["wasted"] / spent, 4) if spent > 0 else 0.0,
        "left": left, "no_more": no_more(jobs),
        "trials": trials,
    }


def no_more(jobs: list[Job]) -> str | None:
    """Why no further trial could start, in the daemon's words (with its numbers): the message of
    the trial ended last for money (``budget_exhausted``), else of the first trial still waiting
    for money or a slot; None when every trial ran (or none waits)."""
    ended = [j for j in jobs if j.status == JobStatus.BUDGET_EXHAUSTED and j.message]
    if ended:
        last = max(ended, key=lambda j: (j.finished_at or j.created_at, j.id or 0))
        return f"{last.name}: {last.message}"
    waiting = next((j for j in jobs if j.status in (JobStatus.QUEUED, JobStatus.HELD) and j.message), None)
    return f"{waiting.name}: {waiting.message}" if waiting is not None else None
