"""Read-only planning commands: estimate, offers, plan. They read the catalog, never a cloud.

Imports stay inside the commands: ``gpuorch offers --json`` must start in well under 0.3 s,
so nothing here loads pydantic or numpy unless the command needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.errors import UserInputError

CATALOG_OPTION = typer.Option(None, "--catalog", help="Offers CSV (default: the shipped snapshot).")
_FLAG = {"params": "--params", "seq_len": "--seq-len", "micro_batch": "--micro-batch", "lora_rank": "--lora-rank",
         "lora_targets": "--lora-targets", "kv_heads": "--kv-heads", "tokens": "--tokens"}  # fmt: skip


def _workload(fields: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    from gpuorch.sizing import Workload

    try:
        return Workload.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][-1]) if err["loc"] else ""
        where = f"{_FLAG.get(name, '--' + name.replace('_', '-'))}: " if name else ""
        fail(where + str(err["msg"]).removeprefix("Value error, "))


@app.command()
def estimate(
    params: str = typer.Option(None, "--params", help="Parameters: 7B, 70e9, 350M."),
    preset: str = typer.Option(None, "--preset", help="Architecture preset: llama-2-7b, mistral-7b, llama-3-8b, "
                               "llama-2-13b, llama-2-70b, llama-3-70b."),
    layers: int = typer.Option(None, "--layers", help="Architecture: transformer layers."),
    hidden: int = typer.Option(None, "--hidden", help="Architecture: hidden size."),
    heads: int = typer.Option(None, "--heads", help="Architecture: attention heads."),
    kv_heads: int = typer.Option(None, "--kv-heads", help="Architecture: KV heads (GQA)."),
    vocab: int = typer.Option(None, "--vocab", help="Architecture: vocabulary size."),
    method: str = typer.Option("full", "--method", help="full | lora | qlora | inference."),
    precision: str = typer.Option("bf16", "--precision", help="bf16 | fp16 | fp8 | int8 | int4."),
    optimizer: str = typer.Option("adamw", "--optimizer", help="adamw | adamw-8bit | sgd."),
    seq_len: int = typer.Option(2048, "--seq-len", help="Sequence (context) length."),
    micro_batch: int = typer.Option(1, "--micro-batch", help="Sequences per GPU per step (inference: concurrent)."),
    checkpointing: bool = typer.Option(None, "--gradient-checkpointing/--no-gradient-checkpointing",
                                       help="Default: on for lora/qlora."),
    lora_rank: int = typer.Option(16, "--lora-rank"),
    lora_targets: str = typer.Option("all-linear", "--lora-targets",
                                     help="q,k,v,o,gate,up,down, attention, mlp or all-linear."),
    sharding: str = typer.Option("auto", "--sharding",
                                 help="auto | none | zero2 | zero3 | fsdp (inference: tensor parallel)."),
    gpus: int = typer.Option(1, "--gpus", min=1, help="GPUs the job is spread over."),
    gpu: str = typer.Option(None, "--gpu", help="Check the fit on this GPU model."),
    tokens: str = typer.Option(None, "--tokens", help="Tokens to train on (or generate): adds runtime estimates."),
    efficiency: float = typer.Option(None, "--efficiency", help="Model FLOPs utilisation (default per GPU class)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Estimate GPU memory per GPU, and the smallest GPU configurations that fit.

    Example: gpuorch estimate --preset llama-3-8b --method qlora --seq-len 4096
    """
    from gpuorch.sizing.report import estimate_report

    arch = None
    if layers or hidden or heads:
        if not (layers and hidden and heads):
            fail("--layers, --hidden and --heads go together; give all three or use --preset")
        arch = {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "vocab": vocab or 32000}
    w = _workload({
        "params": params, "preset": preset, "architecture": arch, "method": method, "precision": precision,
        "optimizer": optimizer, "seq_len": seq_len, "micro_batch": micro_batch, "gradient_checkpointing": checkpointing,
        "lora_rank": lora_rank, "lora_targets": lora_targets, "sharding": sharding, "tokens": tokens,
        "efficiency": efficiency,
    })  # fmt: skip
    try:
        report = estimate_report(w, gpus, gpu)
    except UserInputError as e:
        fail(str(e))
    if json_out:
        emit_json(report)
        return
    s = report["workload"]
    checkpointed = ", gradient checkpointing" if s["gradient_checkpointing"] else ""
    typer.echo(f"{s['params'] / 1e9:.1f}B params ({s['shape']} shape), {s['method']}, {s['precision']}, "
               f"seq {s['seq_len']} x {s['micro_batch']}{checkpointed}")
    on = f"{gpus}x{report['gpu']}" if report["gpu"] else f"{gpus} GPU(s)"
    typer.echo(f"per GPU on {on}, sharding {report['sharding']}:")
    for k, v in report["breakdown"].items():
        typer.echo(f"  {k:<12}{v:>9.2f} GiB")
    typer.echo(f"  {'total':<12}{report['per_gpu_gib']:>9.2f} GiB per GPU, {report['total_gib']:.2f} GiB in all")
    typer.echo("smallest configurations that fit:")
    for f in report["fits"]:
        hours = f" ~{f['est_hours']:.1f} h" if f.get("est_hours") else ""
        typer.echo(f"  {f['gpu_count']:>3} x {f['gpu']:<11} {f['scope']:<10} {f['per_gpu_gib']:>7.1f} / "
                   f"{f['usable_gib']:g} GiB  {f['sharding']}{hours}")


@app.command()
def offers(
    gpu: str = typer.Option(None, "--gpu", help="GPU model; a family name (A100, H100) includes its variants."),
    min_vram: str = typer.Option(None, "--min-vram", help="Minimum memory per GPU: 24, 24GB, 80GiB."),
    spot: bool = typer.Option(False, "--spot", help="Only offers with spot; list spot prices."),
    on_demand: bool = typer.Option(False, "--on-demand", help="List on-demand prices."),
    provider: str = typer.Option(None, "--provider", help="aws, gcp, azure, ..."),
    region: str = typer.Option(None, "--region"),
    catalog: Path = CATALOG_OPTION,
    limit: int = typer.Option(None, "--top", min=1, help="Show the N cheapest."),
    json_out: bool = JSON_OPTION,
) -> None:
    """List offers, cheapest first.

    Example: gpuorch offers --gpu H100 --spot
    """
    from gpuorch import catalog as cat
    from gpuorch.units import parse_size_gib

    if spot and on_demand:
        fail("--spot and --on-demand exclude each other; give one, or neither for both markets")
    try:
        vram = parse_size_gib(min_vram) if min_vram is not None else None
    except ValueError as e:
        fail(f"--min-vram: {e}")
    try:
        rows = cat.select(cat.load_rows(catalog), gpu=gpu, min_vram_gib=vram, provider=provider, region=region,
                          market="spot" if spot else "on-demand" if on_demand else "any")[:limit]  # fmt: skip
    except UserInputError as e:
        fail(str(e))
    if json_out:
        emit_json({"offers": [{**r._asdict(), "listed_price": p} for r, p in rows], "count": len(rows)})
        return
    w = max([16, *(len(r.instance_type) for r, _ in rows)])  # Azure sizes run to 25 characters
    typer.echo(f"{'provider':<8} {'region':<16} {'zone':<18} {'instance':<{w}} {'gpu':<14} "
               f"{'on-demand':>10} {'spot':>9}")
    for r, _ in rows:
        gpu_s = f"{r.gpu_count}x{r.gpu}" if r.gpu else "-"
        spot_s = f"{r.spot_price_per_hour:.3f}" if r.spot_price_per_hour is not None else "-"
        typer.echo(f"{r.provider:<8} {r.region:<16} {r.zone:<18} {r.instance_type:<{w}} {gpu_s:<14} "
                   f"{r.price_per_hour:>10.3f} {spot_s:>9}")
    typer.echo(f"{len(rows)} offer(s), USD per hour")


def _candidate_dict(c: Any) -> dict[str, Any]:
    o = c.offer
    return {
        "provider": o.provider, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
        "gpu": o.gpu, "gpu_count": o.gpu_count, "spot": c.spot, "price_per_hour": c.price_per_hour,
        "est_hours": round(c.est_hours, 4), "est_cost": round(c.est_cost, 4),
        "est_finish_hours": round(c.est_finish_hours, 4),
        "per_gpu_gib": round(c.per_gpu_gib, 2) if c.per_gpu_gib is not None else None,
        "sharding": c.sharding, "billing_granularity_s": o.billing_granularity_s,
        "interruption_bucket": o.interruption_bucket,
        "gpus_used": c.gpus_used or o.gpu_count, "larger": c.larger, "ranked_price_per_hour": c.ranked_price_per_hour,
    }  # fmt: skip


@app.command()
def plan(
    job: Path = typer.Argument(..., help="Job spec (YAML)."),
    catalog: Path = CATALOG_OPTION,
    top: int = typer.Option(10, "--top", min=1, help="How many candidates to show."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Where a job would run and what it would cost: candidates by expected total cost.

    Example: gpuorch plan configs/examples/tiny-mlp.yaml --top 5
    """
    from gpuorch import placement
    from gpuorch.jobs.spec import load_spec
    from gpuorch.jobs.submitcheck import no_candidate_message
    from gpuorch.provider.catalog import load_offers

    try:
        spec = load_spec(job)
        offers = load_offers(catalog)
        if spec.volume is not None:  # placed only where volumes are (as the daemon does); refused if nowhere
            from gpuorch.jobs.submitcheck import volume_scope
            from gpuorch.registry import with_volumes

            named = sorted({o.provider for o in offers})
            spec = volume_scope(spec, named, with_volumes(named), str(job))
        result = placement.plan(spec, offers, limit=top)
    except UserInputError as e:
        fail(str(e))
    if not result.candidates:
        fail(no_candidate_message(spec, result, offers))
    rejected = [{"provider": r.provider, "instance_type": r.instance_type, "gpu": r.gpu, "gpu_count": r.gpu_count,
                 "offers": r.offers, "reason": r.reason} for r in result.rejected]  # fmt: skip
    if json_out:
        candidates = [_candidate_dict(c) for c in result.candidates]
        emit_json({"job": spec.name, "candidates": candidates, "rejected": rejected})
        return
    w = max([16, *(len(c.offer.instance_type) for c in result.candidates)])
    typer.echo(f"{'provider':<8} {'zone':<18} {'instance':<{w}} {'gpu':<13} {'market':<9} "
               f"{'$/h':>8} {'hours':>7} {'est. $':>9}")
    for c in result.candidates:
        o = c.offer
        gpu_s = f"{o.gpu_count}x{o.gpu}" if o.gpu else "-"
        market = "spot" if c.spot else "on-demand"
        notes = [f"{o.gpu_count} GPUs, the job uses {c.gpus_used}"] if c.larger else []
        if c.ranked_price_per_hour is not None:  # a zone far below its siblings: ranked at their median
            notes.append(f"listed ${c.price_per_hour:.3f}/h, ranked at ${c.ranked_price_per_hour:.3f}/h")
        typer.echo(f"{o.provider:<8} {o.zone:<18} {o.instance_type:<{w}} {gpu_s:<13} {market:<9} "
                   f"{c.price_per_hour:>8.3f} {c.est_finish_hours:>7.2f} {c.est_cost:>9.2f}"
                   + (f"  ({'; '.join(notes)})" if notes else ""))  # fmt: skip
    best = result.candidates[0]
    if best.larger:
        exact = next((c for c in result.candidates if not c.larger), None)
        versus = (f"${exact.est_cost:.2f} on the cheapest instance with exactly {exact.gpus_used}" if exact
                  else "no instance with exactly the GPUs asked for is among these candidates")
        typer.echo(f"the cheapest has {best.offer.gpu_count} GPUs, the job uses {best.gpus_used} (allowed by "
                   f"resources.gpu / allow_larger): expected ${best.est_cost:.2f} against {versus}")
    for r in rejected:
        typer.echo(f"rejected {r['provider']} {r['instance_type']} ({r['offers']} offer(s)): {r['reason']}")
