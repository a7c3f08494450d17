"""Providers are found through the entry-point group ``gpuorch.providers``.

An entry point names a Provider class with a ``from_config(options: dict, home: Path)``
classmethod; third parties register their own adapters the same way. Adapters are imported only
when enabled, so an unused cloud SDK is never imported.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .errors import UserInputError
from .provider import Provider

GROUP = "gpuorch.providers"


def available() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def load_provider(name: str, options: dict[str, Any], home: Path) -> Provider:
    eps = {ep.name: ep for ep in entry_points(group=GROUP)}
    if name not in eps:
        raise UserInputError(f"providers.{name}: unknown provider; installed: {', '.join(sorted(eps)) or 'none'}")
    try:
        cls = eps[name].load()
    except ImportError as e:
        raise UserInputError(f"providers.{name}: cannot import its SDK ({e}); install gpuorch[{name}]") from None
    return cls.from_config(options, home)


def load_providers(config: dict[str, dict[str, Any]], home: Path) -> dict[str, Provider]:
    return {name: load_provider(name, opts or {}, home) for name, opts in config.items()}
