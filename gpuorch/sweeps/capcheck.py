"""The submit-time cap check of a sweep: a one-line warning when its budget admits fewer trials
at once than ``max_parallel``, or less than one whole trial at the planner's estimate. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuorch.money.caps import Policy, worst_case

if TYPE_CHECKING:
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.placement import Candidate


def cap_warning(max_cost: float | None, max_parallel: int, job: JobSpec, candidates: Sequence[Candidate],
                policy: Policy | None = None) -> str | None:
    """None when the cap covers ``max_parallel`` admissions on the cheapest candidate (each
    reserves its runway and horizon: ``caps.worst_case``) and, where the planner estimates a
    trial's cost from its work (``model.tokens`` or ``model.duration``: ``Candidate.est_cost``),
    at least one whole trial."""
    if max_cost is None or not candidates:
        return None
    policy = policy or Policy()
    ckpt = job.checkpoint.interval if job.checkpoint is not None else None
    cheapest = min(candidates, key=lambda c: worst_case(c, policy, ckpt))
    need = worst_case(cheapest, policy, ckpt)
    where = f"{cheapest.offer.zone} {cheapest.offer.instance_type} {'spot' if cheapest.spot else 'on-demand'}"
    known = job.model is not None and (job.model.tokens is not None or job.model.duration is not None)
    estimated = [c for c in candidates if c.est_cost > 0] if known else []  # else the planner's default hours
    if estimated:
        best = min(estimated, key=lambda c: c.est_cost)
        if best.est_cost > max_cost:
            return (f"budget.max_cost: ${max_cost:.2f} is less than one whole trial at the planner's estimate "
                    f"(${best.est_cost:.2f} on {best.offer.zone} {best.offer.instance_type}); raise it, or expect "
                    "no trial to finish")
    fits = math.floor(max_cost / need + 1e-9) if need > 0 else max_parallel
    if fits < max_parallel:
        return (f"budget.max_cost: ${max_cost:.2f} admits {fits} trial(s) at once, not max_parallel {max_parallel} "
                f"(each launch reserves ${need:.4f} on {where}); raise the budget or lower max_parallel")
    return None
