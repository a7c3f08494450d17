"""What the planning commands (``estimate``, ``offers``, ``plan``) show beside the ranking: where
the offers come from, how old their prices are, and how a candidate is written out.

Imports stay inside the functions, as in ``planning``: ``offers --price-list --json`` must not
load the configuration or pydantic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuorch.cli.app import fail
from gpuorch.errors import UserInputError


def shipped_source(providers: Any) -> str:
    """The line naming the shipped price list, with the providers its rows come from (every
    installed adapter's snapshot: the hyperscalers' and the neoclouds')."""
    return f"the shipped price list ({', '.join(sorted(set(providers)))})"


def offer_source(catalog: Path | None, price_list: bool) -> tuple[list[Any], str]:
    """The offers to rank and a line naming where they came from. Exits 2 on a bad source."""
    from gpuorch.provider.catalog import load_offers

    if catalog is not None and price_list:
        fail("--catalog and --price-list exclude each other; give one, or neither for the configured providers")
    try:
        if catalog is not None:
            return load_offers(catalog), f"price list {catalog}"
        if price_list:
            offers = load_offers()
            return offers, shipped_source(o.provider for o in offers)
        from gpuorch.cli.app import cli_config
        from gpuorch.registry import offline_offers

        cfg = cli_config()
        names = list(cfg.providers)
        if not names:
            fail("no providers are configured; add providers: to the daemon configuration, or rank a price list "
                 "with --price-list or --catalog FILE")
        return _priced(cfg, offline_offers(dict(cfg.providers), cfg.home)), \
            f"the configured providers ({', '.join(names)})"
    except UserInputError as e:
        fail(str(e))


def _priced(cfg: Any, offers: list[Any]) -> list[Any]:
    """``offers`` with the providers the configuration's ``catalog_files`` price taken from those
    files, as the daemon ranks them (``gpuorch.provider.pricelists``); each row left out is one
    warning line. Raises UserInputError (``catalog_strict``, or ``--strict``: a malformed row)."""
    if not cfg.catalog_files:
        return offers
    from gpuorch import catalog as cat
    from gpuorch.provider.pricelists import price_lists

    lists, notes = price_lists(cfg.catalog_files, cfg.providers, strict=cfg.catalog_strict or cat.strict_now())
    for line in notes:
        typer.echo(f"warning: {line}", err=True)
    return [o for o in offers if o.provider not in lists] + [o for listed in lists.values() for o in listed]


def check_known(what: str, flag: str, wanted: list[str], have: set[str], source: str) -> None:
    unknown = [x for x in wanted if x not in have]
    if unknown:
        known = ", ".join(sorted(have)) or "none"
        if what == "provider" and _unpriced(unknown[0], {}):
            fail(f"{flag}: no {unknown[0]} offers in {source}: gpuorch ships no {unknown[0]} prices; `gpuorch catalog "
                 f"refresh --provider {unknown[0]}` fetches them (docs/catalog.md, Sources); known: {known}")
        fail(f"{flag}: unknown {what} {unknown[0]!r} in {source}; known: {known}")


def _unpriced(name: str, options: Any) -> bool:
    """Whether ``name`` is a cloud that ships no price rows (Azure: docs/catalog.md, "Sources") and
    has no ``catalog:`` of its own, so its prices come only from a refresh."""
    from gpuorch.catalog.registry import catalog_of

    c = catalog_of(name)  # that adapter's catalog alone (catalogs() loads every one: ~58M instructions cold)
    return c is not None and c.rows is None and bool(c.families) and not (options or {}).get("catalog")


def freshness(catalog: Path | None, price_list: bool) -> dict[str, Any]:
    """How old the ranked prices are: a ``--catalog`` file's provenance (``catalog refresh`` writes
    it); for the configured providers, the last refresh of each that reads one
    (``SupportsPriceRefresh``: ``$GPUORCH_HOME/catalog/<provider>.csv``); the shipped price list
    is of unknown age. ``as_of``/``age_s``: the oldest dated file's; ``catalogs``: one per file."""
    from gpuorch.catalog import provenance
    from gpuorch.catalog.refresh import catalog_path
    from gpuorch.clock import utcnow

    now = utcnow()
    if catalog is not None:
        return provenance.freshness(catalog, now)
    if price_list:
        return provenance.freshness(None, now)
    from gpuorch.cli.app import cli_config

    cfg = cli_config()
    dated, undated = [], []
    for name in cfg.providers:
        path = catalog_path(cfg.home, name)
        if provenance.read(path) is not None and _refreshes(name):  # the class only where a refresh was read
            dated.append(provenance.freshness(path, now))
        else:
            undated.append(name)
    lines = [f["line"] for f in dated]
    unpriced = [n for n in undated if _unpriced(n, cfg.providers[n])]
    undated = [n for n in undated if n not in unpriced]
    if unpriced:
        lines.append(f"prices: none for {', '.join(unpriced)} until a refresh (gpuorch ships none; `gpuorch catalog "
                     "refresh --provider NAME` fetches them, as the daemon does at start)")
    if undated:
        lines.append(f"prices: {', '.join(undated)} from the shipped or configured catalog, of unknown age "
                     "(not refreshed; `gpuorch catalog refresh --provider NAME` fetches today's)")
    oldest = max(dated, key=lambda f: f["age_s"], default=None)
    return {"catalog": "configured providers", "as_of": oldest["as_of"] if oldest else None,
            "age_s": oldest["age_s"] if oldest else None, "source": None, "line": "; ".join(lines),
            "catalogs": dated}


def _refreshes(name: str) -> bool:
    """Whether provider ``name`` reads a refreshed catalog (``SupportsPriceRefresh``); an unknown
    one, or one whose SDK is missing, does not."""
    from gpuorch.provider.port import SupportsPriceRefresh
    from gpuorch.registry import provider_class

    try:
        return issubclass(provider_class(name), SupportsPriceRefresh)
    except UserInputError:
        return False


def warn_flagged(catalog: Path | None) -> None:
    """The row audit's warnings for a ``--catalog`` file (implausible spot prices), one line each."""
    if catalog is not None:
        from gpuorch.catalog import flagged

        for line in flagged(catalog):
            typer.echo(f"warning: {line}", err=True)


def gang_limits(providers: set[str]) -> dict[str, int]:
    """The most nodes each provider places per job: its class's declared ``capabilities.max_nodes`` (read,
    never assumed per provider); one that cannot be imported places 1."""
    from gpuorch.registry import provider_class

    limits = {}
    for name in sorted(providers):
        try:
            limits[name] = provider_class(name).capabilities.max_nodes
        except UserInputError:
            limits[name] = 1
    return limits


def candidate_dict(c: Any) -> dict[str, Any]:
    """One candidate as JSON; ``price_per_hour`` is per instance, ``total_price_per_hour`` and
    ``est_cost`` count every node of a gang; ``est_storage_usd`` is the part of ``est_cost`` that
    the job's volume costs while it runs."""
    o = c.offer
    return {
        "provider": o.provider, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
        "gpu": o.gpu, "gpu_count": o.gpu_count, "spot": c.spot, "price_per_hour": c.price_per_hour,
        "nodes": c.nodes, "total_price_per_hour": c.total_price_per_hour,
        "est_hours": round(c.est_hours, 4), "est_cost": round(c.est_cost, 4),
        "est_storage_usd": round(c.est_storage_usd, 4),
        "est_finish_hours": round(c.est_finish_hours, 4),
        "per_gpu_gib": round(c.per_gpu_gib, 2) if c.per_gpu_gib is not None else None,
        "sharding": c.sharding, "billing_granularity_s": o.billing_granularity_s,
        "interruption_bucket": o.interruption_bucket,
        "gpus_used": c.gpus_used or o.gpu_count, "larger": c.larger, "ranked_price_per_hour": c.ranked_price_per_hour,
    }  # fmt: skip


def work_assumption(spec: Any, default_hours: float) -> tuple[str, dict[str, Any]]:
    """The work-hours assumption the ranking used, said plainly, and as data."""
    m = spec.model
    if m is not None and m.duration is not None:
        return f"work: model.duration = {m.duration / 3600:g} h on every offer", {"from": "model.duration",
                                                                                  "hours": m.duration / 3600}
    if m is not None and m.tokens is not None:
        return (f"work: estimated per offer from model.tokens = {m.tokens:g} (docs/sizing.md, Runtime)",
                {"from": "model.tokens", "hours": None})
    if spec.deadline is not None and spec.deadline.job_hours is not None:
        return (f"work: deadline.job_hours = {spec.deadline.job_hours:g} h on every offer",
                {"from": "deadline.job_hours", "hours": spec.deadline.job_hours})
    return (f"work: {default_hours:g} h assumed (the default); give model.tokens, model.duration or "
            "deadline.job_hours for a real estimate", {"from": "default", "hours": default_hours})


def strategy_cell(c: Any, degree: int | None) -> str:
    """What the candidate assumes: the strategy and the GPUs used (``1 of 8``: one GPU of eight;
    ``tp2 x4``: four tensor-parallel replicas of two GPUs)."""
    used, count = c.gpus_used or c.offer.gpu_count, c.offer.gpu_count
    if c.nodes > 1:  # a gang: the strategy over every node's GPUs
        return f"{c.sharding or 'ddp'} {c.nodes}x{used}"
    if c.sharding == "tp" and degree and degree < used:
        return f"tp{degree} x{used // degree}"
    if used < count:
        return f"{used} of {count}"
    if c.sharding in (None, "none"):
        return f"{used} GPU" + ("s" if used > 1 else "")
    return f"{c.sharding} x{used}"


def reserve_line(spec: Any, c: Any, catalog: Path | None, price_list: bool) -> tuple[str, dict[str, Any]]:
    """What a launch of ``spec`` on candidate ``c`` reserves against its caps (job, sweep, daily)
    under the configured daemon's budget policy (the defaults with a price list): its runway, the
    least its guarantees need (``money.caps.runway_s``), and the horizon; said plainly, and as data."""
    from gpuorch.money.caps import Policy, runway_s, worst_case

    policy = Policy()
    if catalog is None and not price_list:  # the configured daemon's decision interval and stop grace
        from gpuorch.cli.app import cli_config

        policy = cli_config().budget_policy()
    ckpt = spec.checkpoint.interval if spec.checkpoint is not None else None
    o, i, s = c.offer, policy.decision_interval_s, policy.stop_grace_s
    runway, need = runway_s(o.min_billing_s, ckpt, policy), worst_case(c, policy, ckpt)
    if ckpt and runway == ckpt + i:
        why = f"the first checkpoint: interval {ckpt:g} s + a look {i:g} s"
    elif runway > 0:
        why = f"the minimum bill {o.min_billing_s} s less the horizon"
    else:
        why = f"no checkpoint interval, and the minimum bill ({o.min_billing_s} s) within the horizon"
    line = (f"each launch reserves ${need:.4f} of its caps on {o.zone} {o.instance_type}: runway {runway:.0f} s "
            f"({why}) + horizon {policy.horizon_s:.0f} s (the next look {i:g} s, a clean stop {s:g} s for the final "
            f"checkpoint upload or a spot notice, the terminating look {i:g} s); what the attempt does not spend "
            "comes back when it ends")
    return line, {"usd": round(need, 6), "runway_s": runway, "horizon_s": policy.horizon_s,
                  "decision_interval_s": i, "stop_grace_s": s}
