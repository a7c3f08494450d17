"""Why offers were rejected: one reason per offer class without a candidate (``gpuorch plan``).

The class-level reason comes from ``requirements`` (GPU, count, memory, CPU, RAM, precision);
otherwise the first per-offer filter that emptied the class, in this order: provider, region,
the job volume's zone, spot availability, the price cap, and finally the caller's ``avoid``.
Only run for explanations: a plain Python pass over the rejected classes' offers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuorch.jobs.spec import JobSpec
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
            elif min(prices) > cap:
                reason = f"above max_price_per_hour ${cap:g}/h (cheapest ${min(prices):.2f}/h)"
            else:
                reason = "avoided (recent preemption, capacity or quota trouble)"
        out.append(Rejection(c.provider, c.instance_type, c.gpu, c.gpu_count, c.stop - c.start, reason, filtered))
    return out


def shortfall(idx: OfferIndex, refused: dict[int, Refusal]) -> Shortfall | None:
    short = [(idx.classes[ci], r) for ci, r in refused.items() if r.need_gib is not None]
    if not short:
        return None
    c, r = max(short, key=lambda cr: (cr[0].gpu_count * (cr[1].usable_gib or 0), -(cr[1].need_gib or 0)))
    return Shortfall(c.label, c.gpu, c.gpu_count, r.need_gib or 0.0, r.usable_gib or 0.0)


MULTI_NODE = "gpuorch places a job on one instance (multi-node placement is not supported yet)"


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
