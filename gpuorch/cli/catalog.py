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
    ProviderError(code="Empty") for no offer; nothing is written then."""
    from gpuorch.catalog.refresh import write_catalog
    from gpuorch.clock import utcnow
    from gpuorch.ops.catalog_refresh import audited, price_source
    from gpuorch.provider.port import SupportsPriceRefresh
    from gpuorch.registry import load_provider

    p = load_provider(provider, options, home)
    try:
        offers = p.refresh_offers() if isinstance(p, SupportsPriceRefresh) else p.offers()
        source = price_source(p)
    finally:
        p.close()
    if not offers:
        raise ProviderError(f"{provider} listed no offers (no priced GPU instance types in its regions); catalog "
                            "left as it was", code="Empty")
    offers = audited(provider, offers, report=lambda line: typer.echo(line, err=True))
    return write_catalog(path, provider, offers, source, utcnow())

