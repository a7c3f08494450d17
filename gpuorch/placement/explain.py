"""Why offers were rejected: one reason per offer class without a candidate (``gpuorch plan``).

The class-level reason comes from ``requirements`` (GPU, count, memory, CPU, RAM, precision);
otherwise the first per-offer filter that emptied the class, in this order: provider, region,
the job volume's zone, spot availability, the price cap, and finally the caller's ``avoid``.
Only run for explanations: a plain Python pass over the rejected classes' offers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuorch.jobs.spec import GpuRequirement, JobSpec
from gpuorch.placement.cost import markets
from gpuorch.placement.index import OfferIndex
from gpuorch.placement.requirements import Refusal


@dataclass(frozen=True)
class Rejection:
    provider: str
    instance_type: str
    gpu: str | None
    gpu_count: int
    offers: int
    reason: str
    filtered: bool = False  # by the job's own restrictions (provider, region, volume zone, market, price, avoid)


@dataclass(frozen=True)
class Shortfall:
    """The largest configuration refused for memory: what the job needs there, what it has."""

    label: str
    gpu: str | None
    gpu_count: int
    need_gib: float
    usable_gib: float


def _row_filters(spec: JobSpec, idx: OfferIndex, volume_zone: str | None) -> list[tuple[str, Callable[[int], bool]]]:
    filters: list[tuple[str, Callable[[int], bool]]] = []
    if spec.providers:
        names = set(spec.providers)
        filters.append((f"provider not in providers ({', '.join(spec.providers)})",
                        lambda r: idx.offers[r].provider in names))
    if spec.regions:
        codes = {idx.regions[r] for r in spec.regions if r in idx.regions}
        filters.append((f"region not in regions ({', '.join(spec.regions)})", lambda r: idx.region[r] in codes))
    if volume_zone:
        zone = idx.zones.get(volume_zone, -1)
        filters.append((f"not in {volume_zone}, the zone of the job's volume", lambda r: idx.zone[r] == zone))
    return filters


def rejections(spec: JobSpec, idx: OfferIndex, volume_zone: str | None, refused: dict[int, Refusal],
               placed: set[int], cap: float) -> list[Rejection]:  # fmt: skip
    """A reason for every class not in ``placed`` (classes that have a candidate)."""
    filters = _row_filters(spec, idx, volume_zone)
    market = markets(spec.spot_policy)
    out = []
    for ci, c in enumerate(idx.classes):
        if ci in placed:
            continue
        reason = refused[ci].reason if ci in refused else None
        filtered = reason is None
        alive = list(range(c.start, c.stop))
        for why, keep in filters if reason is None else ():
            alive = [r for r in alive if keep(r)]
            if not alive:
                reason = why
                break
        if reason is None:
            prices = [p for r in alive for spot in market
                      if (p := (idx.spot_price if spot else idx.price)[r]) is not None]
            if not prices:
                reason = "no spot offering (spot_policy: spot)"
            elif min(prices) > cap:  # ``cap`` is per instance; a gang's is the total over its nodes
                n = spec.nodes
                reason = (f"above max_price_per_hour ${cap * n:g}/h (cheapest ${min(prices) * n:.2f}/h for {n} nodes)"
                          if n > 1 else f"above max_price_per_hour ${cap:g}/h (cheapest ${min(prices):.2f}/h)")
            else:
                reason = "avoided (recent preemption, capacity or quota trouble)"
        out.append(Rejection(c.provider, c.instance_type, c.gpu, c.gpu_count, c.stop - c.start, reason, filtered))
    return out


def shortfall(spec: JobSpec, idx: OfferIndex, volume_zone: str | None, refused: dict[int, Refusal]) -> Shortfall | None:
    """The largest configuration refused for memory among the classes the job's own restrictions
    (providers, regions, its volume's zone) leave it: never one the job excluded."""
    filters = _row_filters(spec, idx, volume_zone)

    def allowed(ci: int) -> bool:
        c = idx.classes[ci]
        return any(all(keep(r) for _, keep in filters) for r in range(c.start, c.stop))

    short = [(idx.classes[ci], r) for ci, r in refused.items() if r.need_gib is not None and allowed(ci)]
    if not short:
        return None
    c, r = max(short, key=lambda cr: (cr[0].gpu_count * (cr[1].usable_gib or 0), -(cr[1].need_gib or 0)))
    return Shortfall(c.label, c.gpu, c.gpu_count, r.need_gib or 0.0, r.usable_gib or 0.0)


# What a job that needs more than one instance must say (docs/sizing.md, "Multi-node jobs").
MULTI_NODE = ("gpuorch places a job on one instance unless it asks for a gang with nodes: N (N instances of one "
              "type, on a provider that places that many)")


def beyond_one_node(spec: JobSpec) -> str | None:
    """Why ``resources.gpu`` asks for more GPUs than any one instance of that model has, or None."""
    from gpuorch import gpus

    req = spec.resources.gpu
    if req is None:
        return None
    table = [g for g in gpus.GPUS if req.name is None or gpus.family(g.name) == gpus.family(req.name)]
    most = max(g.max_per_node for g in table)
    if req.count <= most:
        return None
    return (f"{spec.name}: resources.gpu asks for {req.count} {req.name or 'GPUs'} on one instance; no instance has "
            f"more than {most}, and {MULTI_NODE}: ask for at most {most} GPUs, or use a model: block to size the job")


def no_single_instance(spec: JobSpec) -> str | None:
    """Why no instance of any GPU model gpuorch knows could hold the job, whatever the catalog (a
    job placement could never start), or None. Needs no offers: the API server and a remote
    ``submit`` use it; with a catalog, ``plan`` gives a more precise message."""
    over = beyond_one_node(spec)
    if over is not None or spec.model is None:
        return over
    from gpuorch.sizing.fit import smallest_fits
    from gpuorch.sizing.report import advice, strategy_hint

    fits = smallest_fits(spec.model)
    if any(f.nodes == 1 for f in fits):
        return None
    if spec.model.strategy.strategy == "none" and (hint := strategy_hint(spec.model)):
        return (f"{spec.name}: no single GPU holds this model and the job declares no distributed strategy "
                f"(a multi-GPU offer is only a place to run a one-GPU job); add {hint}")
    smallest = (f"the smallest configuration is {fits[0].nodes} nodes of {fits[0].gpus_per_node}x{fits[0].gpu} "
                f"({fits[0].sharding})" if fits else "no configuration of up to 16 nodes holds it")
    return (f"{spec.name}: no single instance of any GPU model holds this model ({smallest}); {MULTI_NODE}; "
            f"{advice(spec.model, more_gpus=False)}")


def _count_form(req: GpuRequirement) -> str:
    return f"{req.name + ':' if req.name else ''}{f'{req.min_memory_gib:g}GB+:' if req.min_memory_gib else ''}"


def _gpu_classes(req: GpuRequirement, idx: OfferIndex) -> list[int]:
    floor = req.memory_floor_gib()
    from gpuorch import gpus

    return [ci for ci, c in enumerate(idx.classes)
            if req.matches(c.gpu) and gpus.memory_matches(c.gpu_memory_gib, floor)]  # fmt: skip


def unsold_count(spec: JobSpec, offers: OfferIndex) -> str | None:
    """``resources.gpu`` asks for a count no instance type of that GPU has (``A100:3``), in any
    region: one line with the counts that exist and the fix, or None. None too when the GPU is
    not sold at all (the plan's rejections say so)."""
    req = spec.resources.gpu
    if req is None:
        return None
    counts = sorted({offers.classes[ci].gpu_count for ci in _gpu_classes(req, offers)})
    if not counts or any(req.allows(n, spec.resources.allow_larger) for n in counts):
        return None
    what, form = req.name or f"{req.min_memory_gib:g}GB+ GPUs", _count_form(req)
    above = [n for n in counts if n > req.count]
    fix = f"write {form}{above[0]} or {form}{req.count}+" if above else f"write {form}{counts[-1]}"
    return (f"{spec.name}: resources.gpu: no instance type has {req.count_text} {what}; the counts sold are "
            f"{', '.join(map(str, counts))}: {fix}")


def count_advice(spec: JobSpec, idx: OfferIndex) -> str | None:
    """No offer where the job may run (its providers and regions) has the GPU count it asks for,
    though some have more: say so in one line, with the counts there and how to accept them."""
    req = spec.resources.gpu
    if req is None:
        return None
    filters = _row_filters(spec, idx, None)
    here: dict[int, set[str]] = {}
    for ci in _gpu_classes(req, idx):
        c = idx.classes[ci]
        if any(all(keep(r) for _, keep in filters) for r in range(c.start, c.stop)):
            here.setdefault(c.gpu_count, set()).add(c.instance_type)
    if not here or any(req.allows(n, spec.resources.allow_larger) for n in here):
        return None
    where = " in " + ", ".join(spec.regions) if spec.regions else ""
    if spec.providers:
        where += " on " + ", ".join(spec.providers)
    sold = "; ".join(f"{n} on {', '.join(sorted(types))}" for n, types in sorted(here.items()))
    form = _count_form(req)
    larger = [n for n in sorted(here) if n > req.count]
    if not larger:
        return (f"{spec.name}: resources.gpu asks for {req.count_text} {req.name or 'GPUs'}, and no offer{where} has "
                f"that many ({sold}); write {form}{max(here)} or lift the region restriction")
    return (f"{spec.name}: resources.gpu asks for exactly {req.count} {req.name or 'GPU'}, and no offer{where} has "
            f"{req.count} (GPUs per instance there: {sold}); write {form}{larger[0]}, or accept larger instances "
            f"with resources.allow_larger: true (or {form}{req.count}..{larger[-1]})")
