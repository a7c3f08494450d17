"""Providers are found through the entry-point group ``gpuorch.providers``.

An entry point names a Provider class with a ``from_config(options: dict, home: Path)``
classmethod; third parties register their own adapters the same way. Adapters are imported only
when enabled, so an unused cloud SDK is never imported.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from gpuorch.errors import UserInputError
from gpuorch.provider.port import Offer, Provider

GROUP = "gpuorch.providers"


def available() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def provider_class(name: str) -> type[Provider]:
    eps = {ep.name: ep for ep in entry_points(group=GROUP)}
    if name not in eps:
        raise UserInputError(f"providers.{name}: unknown provider; installed: {', '.join(sorted(eps)) or 'none'}")
    try:
        return eps[name].load()  # type: ignore[no-any-return]
    except ImportError as e:
        raise UserInputError(f"providers.{name}: cannot import its SDK ({e}); install gpuorch[{name}]") from None


def load_provider(name: str, options: dict[str, Any], home: Path) -> Provider:
    return provider_class(name).from_config(options, home)  # type: ignore[attr-defined,no-any-return]


def offline_offers(config: dict[str, dict[str, Any]], home: Path) -> list[Offer]:
    """What the enabled providers sell, without calling any cloud (for `submit`'s fit check).

    An adapter may answer with a ``catalog_offers(options, home)`` classmethod; otherwise its
    rows of the shipped catalog are used.
    """
    from gpuorch.catalog import load_offers

    out: list[Offer] = []
    for name, opts in config.items():
        cls = provider_class(name)
        own = getattr(cls, "catalog_offers", None)
        out.extend(own(opts or {}, home) if own else [o for o in load_offers() if o.provider == name])
    return out


def load_providers(config: dict[str, dict[str, Any]], home: Path) -> dict[str, Provider]:
    return {name: load_provider(name, opts or {}, home) for name, opts in config.items()}
