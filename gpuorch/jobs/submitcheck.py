"""What ``submit`` checks before it stores a job: the one implementation, for the local CLI and
the HTTP API alike (``JobService.submit`` calls ``fit_check``; ``JobService.sweep_submit``
calls ``sweep_deadline_check``).

Both look only at what the enabled providers sell (``registry.offline_offers``: no cloud call).
A job no GPU configuration can hold, or whose deadline on-demand cannot meet, is refused with a
one-line ``UserInputError``; one that merely fits no enabled offer today, or whose deadline only
on-demand can meet, is accepted with a warning (the returned line).

Their estimates rank as the daemon and ``gpuorch plan`` do (``estimate_options``): a job's volume
counts its storage for the run at each market's rate.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from gpuorch.errors import UserInputError


def estimate_options(spec: Any, offers: Sequence[Any]) -> Any:
    """The placement options submit's estimates rank ``spec`` with (None: the defaults): the
    daemon's and ``gpuorch plan``'s own (``placement.cost.with_job``), with the storage rates of the
    offers' providers (``money.storage.rate_table``), so a volume job's storage counts everywhere."""
    if spec.volume is None:
        return None
    from gpuorch.money.storage import rate_table
    from gpuorch.placement.cost import with_job

    return with_job(spec, None, storage_rates=rate_table({o.provider for o in offers}))


def estimate_candidates(spec: Any, offers: Sequence[Any], limit: int | None = None) -> list[Any]:
    """``placement.candidates`` of ``spec`` as submit's estimates rank it (``estimate_options``)."""
    from gpuorch import placement

    return placement.candidates(spec, list(offers), limit=limit, options=estimate_options(spec, offers))


def shortfall_message(spec: Any, s: Any) -> str:
    """No instance holds the job's model: the largest configuration tried, what is missing, whether
    several nodes would hold it (not placed), and what to change."""
    from gpuorch import gpus
    from gpuorch.placement.explain import MULTI_NODE
    from gpuorch.sizing.fit import smallest_fit
    from gpuorch.sizing.report import advice

    gpu = gpus.lookup(s.gpu) if s.gpu else None
    fit = smallest_fit(spec.model, gpu) if gpu is not None and spec.model is not None else None
    full_node = gpu is not None and s.gpu_count >= gpu.max_per_node
    nodes = (f"; it needs {fit.nodes} nodes of {fit.gpus_per_node}x{fit.gpu} ({fit.sharding}), but {MULTI_NODE}"
             if fit is not None and fit.nodes > 1 else f"; {MULTI_NODE}" if full_node else "")  # fmt: skip
    return (f"{spec.name}: no offer has enough GPU memory; the largest configuration, {s.label}, needs "
            f"{s.need_gib:.1f} GiB per GPU and has {s.usable_gib:.1f} ({s.need_gib - s.usable_gib:.1f} GiB missing)"
            f"{nodes}; {advice(spec.model, more_gpus=not full_node)}")  # fmt: skip


def no_candidate_message(spec: Any, p: Any, offers: Any = None) -> str:
    """Why ``plan`` found no candidate, in one line. ``offers`` (the list or index planned over)
    lets it name a GPU count that does not exist there (``A100:1`` where only 8-GPU A100
    instances are sold) and the forms that accept what does."""
    from gpuorch.placement.explain import beyond_one_node, count_advice, unsold_count

    over = beyond_one_node(spec)
    if over is not None:
        return over
    if offers is not None:
        from gpuorch.placement import index_for

        idx = index_for(offers)
        advice = unsold_count(spec, idx) or count_advice(spec, idx)
        if advice is not None:
            return advice
    if p.shortfall is not None and not any(r.filtered for r in p.rejected):
        return shortfall_message(spec, p.shortfall)
    reasons: dict[str, int] = {}
    for r in p.rejected:
        reasons[r.reason] = reasons.get(r.reason, 0) + r.offers
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    if not top:  # nothing was ranked at all
        return (f"{spec.name}: no offer satisfies the job: the providers list no offers (a cloud whose prices come "
                "only from a refresh, such as Azure, has none before its first `gpuorch catalog refresh --provider "
                "NAME`, which the daemon also runs at start)")
    return f"{spec.name}: no offer satisfies the job: " + "; ".join(f"{n} offer(s): {why}" for why, n in top)


def volume_scope(spec: Any, providers: Sequence[str], with_volumes: Sequence[str], source: str,
                 sizes: Mapping[str, tuple[float, float]] | None = None,
                 types: Mapping[str, Sequence[str]] | None = None) -> Any:
    """A job with ``volume:`` runs only where volumes are: ``spec`` with ``providers`` narrowed to
    those of the job's allowed ones (its own ``providers:``, else ``providers``, the enabled ones)
    that have volumes (``with_volumes``) and, where ``sizes`` gives a provider's (min, max) GiB,
    can make one of ``volume.size``. UserInputError, one line naming ``volume`` (or
    ``volume.size``) and what would do, when none can. With ``volume.type``, only the providers
    whose disk types (``types``, where a provider says) include it. Pure."""
    if spec.volume is None:
        return spec
    allowed = list(spec.providers or providers)
    keep = [p for p in allowed if p in with_volumes]
    wanted = spec.volume.type
    if wanted is not None and keep and types:
        made = [p for p in keep if p not in types or wanted in types[p]]
        if not made:
            known = "; ".join(f"{p}: {', '.join(types[p])}" for p in keep if p in types)
            raise UserInputError(f"{source}: volume.type: {wanted!r} is not a disk type of the providers this job may "
                                 f"use ({known}); use one of those, or leave it out for each provider's default")
        keep = made
    limits = {p: sizes[p] for p in keep if sizes and p in sizes}
    fits = [p for p in keep if p not in limits or limits[p][0] <= spec.volume.size <= limits[p][1]]
    if keep and not fits:
        ranges = ", ".join(f"{p} {lo:g} to {hi:g} GiB" for p, (lo, hi) in limits.items())
        raise UserInputError(f"{source}: volume.size: {spec.volume.size:g} GiB is outside what the providers can "
                             f"create ({ranges}); choose a size in a range")
    keep = fits
    if keep:
        return spec if keep == allowed and spec.providers else spec.model_copy(update={"providers": keep})
    would = ", ".join(with_volumes) or "none is installed"
    raise UserInputError(f"{source}: volume: none of the providers this job may use ({', '.join(allowed) or 'none'}) "
                         f"has volumes; allow one that does (providers: [...]): {would}")


def workload_check(spec: Any, classes: Mapping[str, Any], source: str) -> None:
    """Refuse (UserInputError) an ``image:`` or ``nodes:`` that no enabled provider the job may
    use can honour: ``classes`` are the enabled providers' classes by name (their
    declared ``capabilities``: ``runs_containers`` and ``max_nodes``)."""
    allowed = {n: c for n, c in classes.items() if spec.providers is None or n in spec.providers}
    names = ", ".join(sorted(allowed)) or "none"
    if spec.image is not None and not any(c.capabilities.runs_containers for c in allowed.values()):
        can = sorted(n for n, c in classes.items() if c.capabilities.runs_containers)
        fix = f"allow one that can ({', '.join(can)})" if can else "enable local, aws, gcp or azure"
        raise UserInputError(f"{source}: image: the providers this job may use ({names}) cannot run containers; "
                             f"{fix}, or remove image")
    if spec.nodes > 1 and not any(c.capabilities.max_nodes >= spec.nodes for c in allowed.values()):
        most = max([c.capabilities.max_nodes for c in allowed.values()] or [1])
        raise UserInputError(f"{source}: nodes: {spec.nodes} nodes, but the providers this job may use ({names}) "
                             f"place at most {most} per job; use nodes: {most}")


def volume_offers(spec: Any, offers: Sequence[Any], attaches: Mapping[str, Any], source: str) -> list[Any]:
    """``offers`` less those whose instance type cannot attach its provider's volume disk type
    (``attaches``: provider -> instance type -> bool), for a ``volume:`` job. UserInputError, one
    line naming ``volume_type``, when that leaves nothing of what the job could otherwise run on."""
    if spec.volume is None or not attaches:
        return list(offers)
    kept = [o for o in offers if o.provider not in attaches or attaches[o.provider](o.instance_type)]
    if len(kept) == len(offers) or spec.resources.gpu is None and spec.model is None:
        return kept
    from gpuorch import placement

    fitting = placement.candidates(spec, list(offers))
    if fitting and not placement.candidates(spec, kept):
        names = sorted({c.offer.provider for c in fitting})
        types = sorted({c.offer.instance_type for c in fitting})[:4]
        if spec.volume.type is not None:
            raise UserInputError(f"{source}: volume.type: the instance types this job fits ({', '.join(types)}) "
                                 f"cannot attach a {spec.volume.type} disk; choose a type they attach, or leave it "
                                 "out (docs/gcp.md#volumes, docs/azure.md#volumes)")
        raise UserInputError(f"{source}: volume: the instance types this job fits ({', '.join(types)}) cannot attach "
                             f"the volume disk type of {', '.join(names)}; set providers.{names[0]}.volume_type to "
                             "one they attach (docs/gcp.md#volumes, docs/azure.md#volumes)")
    return kept


def workdir_check(spec: Any, source: str) -> None:
    """Refuse a ``workdir`` that no runner could copy (``gpuorch.runners.workdir``: missing, not a
    directory, or holding a FIFO, a device, a socket or an unreadable file), in one line. Checked
    again by the runner at the attempt's start, since the directory may change after submit."""
    if not spec.workdir:
        return
    from pathlib import Path

    from gpuorch.runners.workdir import workdir_problem

    problem = workdir_problem(Path(spec.workdir).expanduser())
    if problem is not None:
        shown = spec.workdir if spec.workdir.isprintable() else repr(spec.workdir)
        raise UserInputError(f"{source}: workdir: {shown}: {problem}")


def providers_check(spec: Any, configured: Collection[str], source: str) -> None:
    """Refuse a ``providers:`` restriction naming no enabled provider: the job could never run."""
    if spec.providers is None:
        return
    unknown = [p for p in spec.providers if p not in configured]
    if unknown:
        known = ", ".join(sorted(configured)) or "none"
        raise UserInputError(f"{source}: providers: {unknown[0]!r} is not an enabled provider (enabled: {known}); "
                             "remove it or enable it in the configuration")


def size_check(spec: Any, offers: Sequence[Any], source: str, reference: Sequence[Any] = ()) -> None:
    """Refuse CPUs or memory beyond every offer that states its size (the enabled providers', and
    the sized rows of ``reference``, the shipped catalog): such a job would wait queued forever.
    An enabled provider's offer that does not state a size fits anything; a shipped row without
    one (a market priced by GPU, whose hosts vary) says nothing either way."""
    for field, need, have in (("cpus", spec.resources.cpus, "vcpus"), ("memory", spec.resources.memory, "memory_gib")):
        sizes = [getattr(o, have, 0) or 0 for o in offers]
        sizes += [size for size in (getattr(o, have, 0) or 0 for o in reference) if size]
        if need and sizes and all(sizes) and need > max(sizes):
            unit = "" if field == "cpus" else " GiB"
            raise UserInputError(f"{source}: resources.{field}: {need:g}{unit} is more than any offer has "
                                 f"(the largest: {max(sizes):g}{unit}); lower it")


def spot_check(spec: Any, offers: Sequence[Any], source: str) -> None:
    """``spot_policy: spot`` where none of the providers the job may use sells an interruptible
    market (Lambda sells on-demand only) would wait forever: refused in one line."""
    if spec.spot_policy != "spot":
        return
    allowed = [o for o in offers if spec.providers is None or o.provider in spec.providers]
    if allowed and all(o.spot_price_per_hour is None for o in allowed):
        names = ", ".join(sorted({o.provider for o in allowed}))
        raise UserInputError(f"{source}: spot_policy: spot, but the providers this job may use ({names}) sell no "
                             "spot or interruptible instances; set spot_policy: auto or on-demand, or allow a "
                             "provider with a spot market")


def fit_check(spec: Any, offers: Sequence[Any], source: str, now: datetime,
              configured: Collection[str] | None = None) -> str | None:
    """The planner `gpuorch plan` uses, over ``offers`` (what the enabled providers sell);
    ``configured``, the enabled providers' names, for ``providers_check``.

    A job no GPU configuration can hold is refused; one that merely fits no enabled offer today
    is queued with a warning, since capacity and providers change. So is a deadline that
    on-demand cannot meet (refused), or only on-demand can (a warning): ``deadline_check``.
    """
    from gpuorch import placement
    from gpuorch.placement.explain import beyond_one_node
    from gpuorch.provider.catalog import load_offers

    offers = list(offers)
    workdir_check(spec, source)
    if configured is not None:
        providers_check(spec, configured, source)
    spot_check(spec, offers, source)
    if spec.checkpoint is not None:  # refuse now what the agent could only fail on, on an instance
        from gpuorch.checkpoint.store import not_implemented

        missing = not_implemented(spec.checkpoint.url.scheme)
        if missing:
            raise UserInputError(f"{source}: checkpoint.store: {missing}")
    if spec.resources.gpu is None and spec.model is None:
        size_check(spec, offers, source, load_offers())
        return deadline_check(spec, [], source, now)
    over = beyond_one_node(spec)  # no instance anywhere has that many: it would wait forever
    if over is not None:
        raise UserInputError(over)
    if spec.resources.gpu is not None:  # A100:3: no instance type anywhere has three
        from gpuorch.placement.explain import unsold_count

        unsold = unsold_count(spec, placement.OfferIndex(offers + load_offers()))
        if unsold is not None:
            raise UserInputError(unsold)
    opts = estimate_options(spec, offers)
    result = placement.plan(spec, offers, limit=1, options=opts)
    if result.candidates:
        return deadline_check(spec, placement.candidates(spec, offers, options=opts) if spec.deadline else [],
                              source, now)
    # Refuse only what no configuration anywhere can hold, whatever the job's own restrictions.
    anywhere = spec.model_copy(update={"regions": None, "providers": None, "max_price_per_hour": None})
    relaxed = placement.plan(anywhere, offers + load_offers(), limit=1)
    if not relaxed.candidates and relaxed.shortfall is not None:
        raise UserInputError(shortfall_message(spec, relaxed.shortfall))
    return no_candidate_message(spec, result, offers) + " (it stays queued until an offer fits)"


def deadline_check(spec: Any, candidates: Sequence[Any], source: str, now: datetime,
                   deadline: datetime | None = None) -> str | None:
    """Refuse (UserInputError) a deadline that on-demand cannot meet with the fastest fitting
    offer; a warning when only on-demand can. ``deadline`` (UTC) is a sweep's: the earlier of it
    and the spec's own stands, as for the trials' live policy."""
    from gpuorch.policy.live import feasibility

    if spec.deadline is None and deadline is None:
        return None
    d = spec.deadline
    at = min(filter(None, [deadline, d.resolve(now) if d else None]))
    spot_ok = spec.spot_policy != "on-demand"
    f = feasibility(at, now, d.job_hours if d else None, d.startup if d else None, candidates,
                    spec.checkpoint.interval if spec.checkpoint else None, spot_ok)
    if f.error:
        raise UserInputError(f"{source}: {f.error}")
    if f.warning and spec.spot_policy == "spot":
        return f"{f.warning.split(';')[0]}; with spot_policy: spot it may miss the deadline (set spot_policy: auto)"
    return f.warning


def sweep_deadline_check(spec: Any, trials: list[Any], offers: Sequence[Any], source: str,
                         now: datetime) -> str | None:
    """A trial's deadline (the sweep's, or the template job's when earlier) checked as ``submit``
    checks a job's: refused if on-demand cannot meet it on the fastest fitting offer. Trials share
    one template: the first stands for all. Its ``workdir`` is checked too (``workdir_check``)."""
    if trials:  # they share one template, and so its workdir
        workdir_check(trials[0][1], source)
    if not trials or (spec.deadline is None and trials[0][1].deadline is None):
        return None
    job = trials[0][1]
    if job.deadline is None and (job.model is None or (job.model.tokens is None and job.model.duration is None)):
        return None  # how long a trial runs is not known: nothing to check
    candidates: list[Any] = []
    if job.resources.gpu is not None or job.model is not None:
        candidates = estimate_candidates(job, offers)
    return deadline_check(job, candidates, source, now, deadline=spec.deadline)
