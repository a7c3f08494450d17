"""``gpuorch catalog refresh``: ask a configured provider for its offers and save them as a catalog.

The one command that calls a cloud, and only to read: the daemon config names the provider
and its options, the provider lists its offers (instance types, zones, prices), and the result
is written as a catalog CSV (``$GPUORCH_HOME/catalog/<provider>.csv`` by default) that
``gpuorch offers --catalog FILE`` and ``gpuorch plan --catalog FILE`` read.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.errors import ProviderError, UserInputError

catalog_app = typer.Typer(help="The offers catalog: refresh it from a provider's API.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")


@catalog_app.command()
def refresh(
    provider: str = typer.Option(..., "--provider", help="Provider to ask (as named in the daemon config): aws."),
    config: Path = typer.Option(None, "--config", help="Daemon configuration (YAML) with the provider's options."),
    output: Path = typer.Option(None, "--output", "-o", help="Default: $GPUORCH_HOME/catalog/<provider>.csv."),
    json_out: bool = JSON_OPTION,
) -> None:
    """List a provider's offers through its API and write them as a catalog CSV.

    Example: gpuorch catalog refresh --provider aws -o aws.csv
    """
    from gpuorch.catalog import OfferRow, write_csv
    from gpuorch.ops.config_sources import load_config
    from gpuorch.registry import load_provider

    try:
        cfg = load_config(config)
        if provider not in cfg.providers:
            where = config or cfg.home / "config.yaml"
            fail(f"--provider: {provider} is not configured in {where}; add providers.{provider} there")
        p = load_provider(provider, cfg.providers[provider] or {}, cfg.home)
        try:
            offers = p.offers()
        finally:
            p.close()
    except UserInputError as e:
        fail(str(e))
    except ProviderError as e:
        fail(f"{provider}: {e}", code=1)
    if not offers:
        fail(f"{provider} listed no offers (no priced GPU instance types in its regions); catalog left as it was",
             code=1)
    path = output or cfg.home / "catalog" / f"{provider}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # written whole, then renamed: a reader never sees half a catalog
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            write_csv((OfferRow(**o.model_dump()) for o in offers), f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    summary: dict[str, Any] = {"provider": provider, "path": str(path), "offers": len(offers),
               "regions": sorted({o.region for o in offers}),
               "instance_types": sorted({o.instance_type for o in offers})}
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"wrote {len(offers)} {provider} offers ({len(summary['instance_types'])} instance types in "
                   f"{len(summary['regions'])} regions) to {path}")
