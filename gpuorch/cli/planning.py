"""Read-only planning commands: offers, plan (``estimate.py`` has ``estimate``). They never call a cloud.

``offers`` and ``plan`` rank what the daemon would use: the configured providers (``local`` and
``sim`` included), each through its ``catalog_offers`` (no cloud call: the shipped catalog's rows
for the clouds, the simulated markets for local and sim). ``--catalog FILE`` ranks a price list
instead, ``--price-list`` the shipped price list (every shipped adapter's rows); every output names the source.

Imports stay inside the commands: ``gpuorch offers --json`` must start in well under 0.3 s,
so nothing here loads pydantic or numpy unless the command needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.cli.planning_view import (
    candidate_dict,
    check_known,
    freshness,
    gang_limits,
    offer_source,
    reserve_line,
    shipped_source,
    strategy_cell,
    warn_flagged,
    work_assumption,
)
from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.placement import Candidate
    from gpuorch.placement.cost import PlacementOptions
    from gpuorch.provider.port import Offer

CATALOG_OPTION = typer.Option(None, "--catalog", help="Rank this offers CSV (a price list) instead of the "
                              "configured providers.")
PRICE_LIST_OPTION = typer.Option(False, "--price-list", help="Rank the shipped price list (AWS, GCP, Lambda, "
                                 "RunPod, Vast) instead of the configured providers.")
STRICT_OPTION = typer.Option(False, "--strict", help="Refuse a --catalog (ours or gpuhunt's) with any malformed "
                             "row or one failing the audit (default: skip the row and say which).")


@app.command()
def offers(
    gpu: str = typer.Option(None, "--gpu", help="GPU model; a family name (A100, H100) includes its variants."),
    min_vram: str = typer.Option(None, "--min-vram", help="Minimum memory per GPU: 24, 24GB, 80GiB."),
    spot: bool = typer.Option(False, "--spot", help="Only offers with spot; list spot prices."),
    on_demand: bool = typer.Option(False, "--on-demand", help="List on-demand prices."),
    provider: str = typer.Option(None, "--provider", help="aws, gcp, azure, ..."),
    region: str = typer.Option(None, "--region"),
    catalog: Path = CATALOG_OPTION,
    price_list: bool = PRICE_LIST_OPTION,
    limit: int = typer.Option(None, "--top", max=1_000_000, min=1, help="Show the N cheapest."),
    strict: bool = STRICT_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """List offers, cheapest first: the configured providers' (or a price list's).

    Example: gpuorch offers --gpu H100 --spot
    """
    from gpuorch import catalog as cat

    with cat.strict_rows(strict):
        _offers(gpu, min_vram, spot, on_demand, provider, region, catalog, price_list, limit, json_out)


def _offers(gpu: str | None, min_vram: str | None, spot: bool, on_demand: bool, provider: str | None,
            region: str | None, catalog: Path | None, price_list: bool, limit: int | None, json_out: bool) -> None:
    from gpuorch import catalog as cat
    from gpuorch.units import parse_size_gib

    if spot and on_demand:
        fail("--spot and --on-demand exclude each other; give one, or neither for both markets")
    try:
        vram = parse_size_gib(min_vram) if min_vram is not None else None
    except ValueError as e:
        fail(f"--min-vram: {e}")
    if (catalog is not None) != price_list:  # a price list as rows: no config, no typed offers (fast path)
        try:
            all_rows = cat.load_rows(catalog)
        except UserInputError as e:
            fail(str(e))
        source = f"price list {catalog}" if catalog is not None else shipped_source(r.provider for r in all_rows)
    else:
        found, source = offer_source(catalog, price_list)
        all_rows = [cat.OfferRow(**o.model_dump(include=set(cat.OfferRow._fields))) for o in found]
    check_known("provider", "--provider", [provider.lower()] if provider else [], {r.provider for r in all_rows},
                source)
    check_known("region", "--region", [region] if region else [], {r.region for r in all_rows}, source)
    try:
        rows = cat.select(all_rows, gpu=gpu, min_vram_gib=vram, provider=provider, region=region,
                          market="spot" if spot else "on-demand" if on_demand else "any")[:limit]  # fmt: skip
    except UserInputError as e:
        fail(str(e))
    warn_flagged(catalog)
    if json_out:
        emit_json({"offers": [{**r._asdict(), "listed_price": p} for r, p in rows], "count": len(rows),
                   "source": source, "prices": freshness(catalog, price_list)})
        return
    w = max([16, *(len(r.instance_type) for r, _ in rows)])  # Azure sizes run to 25 characters
    g = max([14, *(len(f"{r.gpu_count}x{r.gpu}") for r, _ in rows if r.gpu)])  # 1xA100-PCIE-80GB
    typer.echo(f"{'provider':<8} {'region':<16} {'zone':<18} {'instance':<{w}} {'gpu':<{g}} "
               f"{'on-demand':>10} {'spot':>9}")
    for r, _ in rows:
        gpu_s = f"{r.gpu_count}x{r.gpu}" if r.gpu else "-"
        spot_s = f"{r.spot_price_per_hour:.3f}" if r.spot_price_per_hour is not None else "-"
        typer.echo(f"{r.provider:<8} {r.region:<16} {r.zone:<18} {r.instance_type:<{w}} {gpu_s:<{g}} "
                   f"{r.price_per_hour:>10.3f} {spot_s:>9}")
    typer.echo(f"{len(rows)} offer(s), USD per hour, from {source}")
    typer.echo(freshness(catalog, price_list)["line"])


@app.command()
def plan(
    job: Path = typer.Argument(..., help="Job spec (YAML)."),
    catalog: Path = CATALOG_OPTION,
    price_list: bool = PRICE_LIST_OPTION,
    top: int = typer.Option(10, "--top", max=1_000_000, min=1, help="How many candidates to show."),
    strict: bool = STRICT_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Where a job would run and what it would cost: candidates by expected total cost, over the
    configured providers' offers (or a price list's).

    Example: gpuorch plan configs/examples/tiny-mlp.yaml --top 5
    """
    from gpuorch import catalog as cat

    with cat.strict_rows(strict):
        _plan(job, catalog, price_list, top, json_out)


def _echo_stack(model: Any) -> None:
    """The assumptions a job's ``model:`` took from its training stack, as one line."""
    if model is not None:
        from gpuorch.sizing.report import stack_line

        if (line := stack_line(model)) is not None:
            typer.echo(f"model: {line}")


def _plan(job: Path, catalog: Path | None, price_list: bool, top: int, json_out: bool) -> None:
    from gpuorch import placement
    from gpuorch.jobs.submitcheck import no_candidate_message

    spec, found, source = _plan_spec(job, catalog, price_list)
    options = _plan_options(spec, found, source)
    work_line, work = work_assumption(spec, options.default_hours)
    try:
        result = placement.plan(spec, found, limit=top, options=options)
    except UserInputError as e:
        fail(str(e))
    warn_flagged(catalog)
    if not result.candidates:
        fail(f"{no_candidate_message(spec, result, found)} (ranked {source})")
    from gpuorch.cli.planning_owned import owned_first, owned_json, owned_lines

    owned = owned_first(spec, found, options)  # owned capacity first, cloud burst after
    rejected = [{"provider": r.provider, "instance_type": r.instance_type, "gpu": r.gpu, "gpu_count": r.gpu_count,
                 "offers": r.offers, "reason": r.reason} for r in result.rejected]  # fmt: skip
    reserve, reserved = reserve_line(spec, result.candidates[0], catalog, price_list)
    if json_out:
        candidates = [candidate_dict(c) for c in result.candidates]
        emit_json({"job": spec.name, "source": source, "work": work, "strategy": spec.strategy.model_dump(),
                   "nodes": spec.nodes, "reserve": reserved,
                   "candidates": candidates, "rejected": rejected, "owned_first": owned_json(owned),
                   "prices": freshness(catalog, price_list)})
        return
    _echo_candidates(spec, result.candidates, source, work_line)
    typer.echo(reserve)
    for line in owned_lines(owned):
        typer.echo(line)
    for r in rejected:
        typer.echo(f"rejected {r['provider']} {r['instance_type']} ({r['offers']} offer(s)): {r['reason']}")
    typer.echo(freshness(catalog, price_list)["line"])


def _plan_spec(job: Path, catalog: Path | None, price_list: bool) -> tuple[JobSpec, list[Offer], str]:
    """The job's spec, the offers to rank and their source; the spec's volume placed only where
    volumes are (as the daemon does), its providers and regions among those ranked. Anything
    wrong fails in one line, the spec's own errors first."""
    from gpuorch.jobs.spec import load_spec

    try:
        spec = load_spec(job)
    except UserInputError as e:
        fail(str(e))
    found, source = offer_source(catalog, price_list)
    try:
        if spec.volume is not None:  # placed only where volumes are (as the daemon does); refused if nowhere
            from gpuorch.jobs.submitcheck import volume_scope
            from gpuorch.registry import with_volumes

            named = sorted({o.provider for o in found})
            spec = volume_scope(spec, named, with_volumes(named), str(job))
    except UserInputError as e:
        fail(str(e))
    check_known("provider", "providers", list(spec.providers or ()), {o.provider for o in found}, source)
    check_known("region", "regions", list(spec.regions or ()), {o.region for o in found}, source)
    return spec, found, source


def _plan_options(spec: JobSpec, found: list[Offer], source: str) -> PlacementOptions:
    """Placement options as the daemon sets them: the job's hours, each provider's gang size, and
    each market's storage rate for a job with a volume."""
    from gpuorch.money.storage import rate_table
    from gpuorch.placement.cost import PlacementOptions, with_job

    hours = PlacementOptions().default_hours
    if spec.deadline is not None and spec.deadline.job_hours is not None:
        hours = spec.deadline.job_hours
    # A gang goes only to providers whose adapter places that many nodes (Capabilities.max_nodes).
    limits = gang_limits({o.provider for o in found}) if spec.nodes > 1 else None
    if limits is not None:
        mine = {p: n for p, n in limits.items() if not spec.providers or p in spec.providers}
        if not any(n >= spec.nodes for n in mine.values()):
            most = max(mine.values(), default=1)
            fail(f"nodes: {spec.nodes} instances, but none of the providers ranked ({', '.join(sorted(mine))}) "
                 f"places more than {most} per job; use nodes: {most}, or configure a provider whose adapter places "
                 f"gangs (gpuorch doctor lists each one's nodes per job) (ranked {source})")
    # A job's volume bills its storage while it runs: each market's rate counts (the daemon's own path).
    return with_job(spec, PlacementOptions(default_hours=hours, max_nodes=limits),
                    storage_rates=rate_table({o.provider for o in found})) or PlacementOptions()


def _echo_candidates(spec: JobSpec, candidates: list[Candidate], source: str, work_line: str) -> None:
    """The ranking as text: what was ranked and assumed, the candidates' table, and why the
    cheapest is a larger instance than the job asked for, when it is."""
    gang, vol = spec.nodes > 1, spec.volume is not None
    typer.echo(f"ranked {source}; {work_line}" + (f"; a gang of {spec.nodes} instances of one type in one zone: "
                                                  "$/h per node, est. $ over every node" if gang else "")
               + (f"; est. $ includes the {spec.volume.size:g} GiB volume's storage for the run (storage $, "
                  "each market's rate; a volume kept after the job bills on)" if spec.volume else ""))
    _echo_stack(spec.model)
    w = max([16, *(len(c.offer.instance_type) for c in candidates)])
    g = max([13, *(len(f"{c.nodes}x{c.offer.gpu_count}x{c.offer.gpu}") for c in candidates if c.offer.gpu)])
    typer.echo(f"{'provider':<8} {'zone':<18} {'instance':<{w}} {'gpu':<{g}} {'uses':<10} {'market':<9} "
               f"{'$/h':>8} " + (f"{'total $/h':>9} " if gang else "") + f"{'hours':>7} {'est. $':>9}"
               + (f" {'storage $':>9}" if vol else ""))
    for c in candidates:
        o = c.offer
        gpu_s = (f"{c.nodes}x" if gang else "") + (f"{o.gpu_count}x{o.gpu}" if o.gpu else "-")
        market = "spot" if c.spot else "on-demand"
        notes = [f"{o.gpu_count} GPUs, the job uses {c.gpus_used}"] if c.larger else []
        if c.ranked_price_per_hour is not None:  # a zone far below its siblings: ranked at their median
            notes.append(f"listed ${c.price_per_hour:.3f}/h, ranked at ${c.ranked_price_per_hour:.3f}/h")
        uses = strategy_cell(c, spec.strategy.degree)
        total = f"{c.total_price_per_hour:>9.3f} " if gang else ""
        typer.echo(f"{o.provider:<8} {o.zone:<18} {o.instance_type:<{w}} {gpu_s:<{g}} {uses:<10} "
                   f"{market:<9} {c.price_per_hour:>8.3f} {total}{c.est_finish_hours:>7.2f} {c.est_cost:>9.2f}"
                   + (f" {c.est_storage_usd:>9.2f}" if vol else "")
                   + (f"  ({'; '.join(notes)})" if notes else ""))  # fmt: skip
    if candidates[0].larger:
        _echo_larger(spec, candidates)


def _echo_larger(spec: JobSpec, candidates: list[Candidate]) -> None:
    """Why the cheapest candidate has more GPUs than the job uses, against the cheapest exact one."""
    best = candidates[0]
    exact = next((c for c in candidates if not c.larger), None)
    versus = (f"${exact.est_cost:.2f} on the cheapest instance with exactly {exact.gpus_used}" if exact
              else "no instance with exactly the GPUs asked for is among these candidates")
    d = spec.strategy
    why = ("allowed by resources.gpu / allow_larger" if spec.resources.gpu is not None
           else "a model job without a distributed strategy runs on one GPU" if d.strategy == "none"
           else f"distributed: {d.strategy} over {d.degree}")
    typer.echo(f"the cheapest has {best.offer.gpu_count} GPUs, the job uses {best.gpus_used} ({why}): "
               f"expected ${best.est_cost:.2f} against {versus}")
