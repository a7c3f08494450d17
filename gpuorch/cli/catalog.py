"""``gpuorch catalog refresh``: ask a configured provider for its offers and save them as a catalog.

The one command that calls a cloud, and only to read: the daemon config names the provider
and its options, the provider lists its offers (instance types, zones, prices: live from its
price APIs where it has ``SupportsPriceRefresh``, as GCP and Azure do; AWS's ``offers()`` is
live already), and the result is written as a catalog CSV (``$GPUORCH_HOME/catalog/<provider>.csv``
by default) that ``gpuorch offers --catalog FILE`` and ``gpuorch plan --catalog FILE`` read, with
its provenance (source and time) beside it (``gpuorch.catalog.provenance``). A refresh that
fails, or whose answer does not parse, writes nothing: the last catalog stays.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.errors import AuthError, ProviderError, UserInputError

catalog_app = typer.Typer(help="The offers catalog: refresh it from a provider's API.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")


@catalog_app.command()
def refresh(
    provider: str = typer.Option(..., "--provider", help="Provider to ask (as named in the daemon config): aws, "
                                 "gcp, azure."),
    config: Path = typer.Option(None, "--config", help="Daemon configuration (YAML) with the provider's options."),
    output: Path = typer.Option(None, "--output", "-o", help="Default: $GPUORCH_HOME/catalog/<provider>.csv."),
    json_out: bool = JSON_OPTION,
) -> None:
    """List a provider's offers through its API and write them as a catalog CSV.

    Example: gpuorch catalog refresh --provider aws -o aws.csv
    """
    from gpuorch.ops.config_sources import load_config

    try:
        cfg = load_config(config)
        if provider not in cfg.providers:
            where = config or cfg.home / "config.yaml"
            fail(f"--provider: {provider} is not configured in {where}; add providers.{provider} there")
        path = output or cfg.home / "catalog" / f"{provider}.csv"
        summary = refresh_catalog(provider, cfg.providers[provider] or {}, cfg.home, path)
    except UserInputError as e:
        fail(str(e))
    except AuthError as e:  # missing credentials, a permission or an API not enabled: the message names it
        fail(f"{provider}: {e}; catalog left as it was")
    except ProviderError as e:
        if e.code == "Unparseable":
            fail(f"{provider}: {e}; catalog left as it was")
        fail(f"{provider}: {e}", code=1)
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"wrote {summary['offers']} {provider} offers ({len(summary['instance_types'])} instance types in "
                   f"{len(summary['regions'])} regions) to {summary['path']}, from {summary['source']}")


def refresh_catalog(provider: str, options: dict[str, Any], home: Path, path: Path) -> dict[str, Any]:
    """Ask ``provider`` for its offers (live prices where it can refresh them) and write them to
    ``path`` whole, with provenance; returns the summary. Raises what the provider raises, and
    ProviderError(code="Empty") for no offer; nothing is written then. The daemon's scheduled
    refresh calls this too."""
    from gpuorch.catalog import OfferRow, provenance, write_csv
    from gpuorch.clock import utcnow
    from gpuorch.provider.port import SupportsPriceRefresh
    from gpuorch.registry import load_provider

    p = load_provider(provider, options, home)
    try:
        offers = p.refresh_offers() if isinstance(p, SupportsPriceRefresh) else p.offers()
        source = str(getattr(p, "price_source", f"{provider} offers()"))
    finally:
        p.close()
    if not offers:
        raise ProviderError(f"{provider} listed no offers (no priced GPU instance types in its regions); catalog "
                            "left as it was", code="Empty")
    offers = _audited(provider, offers)
    fetched_at = utcnow()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # written whole, then renamed: a reader never sees half a catalog
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            write_csv((OfferRow(**o.model_dump()) for o in offers), f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    record = provenance.write(path, provider=provider, source=source, fetched_at=fetched_at, offers=len(offers))
    return {"provider": provider, "path": str(path), "offers": len(offers),
            "regions": sorted({o.region for o in offers}), "instance_types": sorted({o.instance_type for o in offers}),
            "source": source, "fetched_at": record["fetched_at"]}


def _audited(provider: str, offers: list[Any]) -> list[Any]:
    """The row audit (``gpuorch.catalog.audit``) over what the provider listed: a row that fails
    a check is left out and named on stderr, one line each; a flagged spot price is kept and named."""
    from gpuorch.catalog import OfferRow
    from gpuorch.catalog.audit import audit_rows

    findings = audit_rows([OfferRow(**o.model_dump()) for o in offers])
    for f in findings:
        typer.echo(f"{'left out' if f.severity == 'error' else 'flagged'}: {f.line(provider)}", err=True)
    bad = {f.index for f in findings if f.severity == "error"}
    return [o for i, o in enumerate(offers) if i not in bad]

