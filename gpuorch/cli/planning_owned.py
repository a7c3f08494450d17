"""What ``gpuorch plan`` shows of owned capacity first, cloud burst after (gpuorch.placement.owned):
the owned option, the burst option, which one the daemon takes while owned capacity is free, and
what it does when that capacity is full (wait up to ``max_wait``, or burst at once).

``plan`` reads the catalog, never the pool's leases: whether a slot is free right now is the
daemon's to find out, so both cases are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuorch.errors import UserInputError


def _owned_names(providers: set[str]) -> frozenset[str]:
    """The providers among ``providers`` whose adapter class declares owned capacity."""
    from gpuorch.placement.owned import owned_providers
    from gpuorch.registry import provider_class

    classes: dict[str, object] = {}
    for name in sorted(providers):
        try:
            classes[name] = provider_class(name)
        except UserInputError:
            continue  # not installed: not owned as far as plan can tell
    return owned_providers(classes)


def owned_first(spec: Any, offers: Sequence[Any], options: Any) -> dict[str, Any] | None:
    """The owned and burst options of ``spec`` over ``offers``, and the daemon's choice with the
    owned capacity free and full; None when no owned offer holds the job."""
    from gpuorch import placement
    from gpuorch.clock import utcnow
    from gpuorch.placement.owned import choose

    named = {o.provider for o in offers if not spec.providers or o.provider in spec.providers}
    owned = _owned_names(named)
    if not owned:
        return None
    idx = placement.index_for(offers)  # one index for both rankings
    mine = placement.candidates(spec.model_copy(update={"providers": sorted(owned)}), idx, options=options)
    others = sorted(named - owned)
    clouds = placement.candidates(spec.model_copy(update={"providers": others}), idx, options=options) \
        if others else []
    now = utcnow()
    left = (spec.deadline.resolve(now) - now).total_seconds() if spec.deadline is not None else None
    hours = spec.deadline.job_hours if spec.deadline is not None else None
    free = choose(mine, [], clouds, max_wait_s=spec.max_wait, waited_s=0.0, time_left_s=left, job_hours=hours)
    full = choose([], mine, clouds, max_wait_s=spec.max_wait, waited_s=0.0, time_left_s=left, job_hours=hours)
    if free is None or full is None:
        return None
    return {"owned": free.owned, "burst": free.burst, "choice": free.kind, "why": free.why,
            "when_full": full.kind, "when_full_why": full.why}


def owned_json(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """``owned_first``'s answer with its candidates written out as ``plan --json`` writes them."""
    from gpuorch.cli.planning_view import candidate_dict

    if found is None:
        return None
    return {k: candidate_dict(v) if k in ("owned", "burst") and v is not None else v for k, v in found.items()}


def owned_lines(found: dict[str, Any] | None) -> list[str]:
    """``owned_first``'s answer as the lines ``plan`` prints."""
    if found is None:
        return []

    def line(c: Any) -> str:
        if c is None:
            return "none"
        o = c.offer
        return (f"{o.provider} {o.zone} {o.instance_type} at ${c.total_price_per_hour:.3f}/h, "
                f"{c.est_finish_hours:.2f} h, est. ${c.est_cost:.2f}")

    return [f"owned option: {line(found['owned'])}", f"burst option: {line(found['burst'])}",
            f"while a slot is free: {found['choice']}: {found['why']}",
            f"when it is full: {found['when_full']}: {found['when_full_why']}"]
