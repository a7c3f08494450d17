"""Providers are found through entry points: the provider classes in ``gpuorch.providers``
(each adapter's catalog is found the same way, by ``gpuorch.catalog.registry``).

A provider entry point names a ``Provider`` class (``from_config(options, home)`` builds it);
third parties register their own adapters the same way. Adapters are imported only when
enabled, so an unused cloud SDK is never imported; a catalog entry point names a stdlib-only
module, so reading catalogs (``gpuorch offers``) imports no SDK and no pydantic.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, EntryPoints, PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    from gpuorch.provider.port import Offer, Provider

GROUP = "gpuorch.providers"
CATALOG_GROUP = "gpuorch.catalogs"  # gpuorch.catalog.registry's: each adapter's AdapterCatalog


def _by_group(found: Any) -> dict[str, dict[str, EntryPoint]]:  # EntryPoints, or 3.11's SelectableGroups
    return {group: {ep.name: ep for ep in found.select(group=group)} for group in (GROUP, CATALOG_GROUP)}


@functools.cache
def _shipped() -> dict[str, dict[str, EntryPoint]]:
    """gpuorch's own distribution's provider and catalog entry points (the shipped adapters), by
    group and name: one metadata file read, where a scan of every installed distribution costs
    ~5 ms (a cold ``gpuorch offers`` of the shipped ``local`` needs no scan)."""
    try:
        return _by_group(distribution("gpuorch").entry_points)
    except PackageNotFoundError:  # run from a source tree that is not installed
        return _by_group(EntryPoints(()))


@functools.cache
def _groups() -> dict[str, dict[str, EntryPoint]]:
    """Every installed distribution's provider and catalog entry points, read once a process; a
    shipped adapter's name is the shipped adapter's, whatever another distribution registers."""
    found, shipped = _by_group(entry_points()), _shipped()
    return {group: {**eps, **shipped[group]} for group, eps in found.items()}


def _entry_points() -> dict[str, EntryPoint]:
    return _groups()[GROUP]


def _entry_point(group: str, name: str) -> EntryPoint | None:
    """The entry point ``name`` of ``group``: a shipped adapter's without scanning every
    installed distribution."""
    return _shipped()[group].get(name) or _groups()[group].get(name)


def available() -> list[str]:
    return sorted(_entry_points())


def provider_class(name: str) -> type[Provider]:
    ep = _entry_point(GROUP, name)
    if ep is None:
        eps = _entry_points()
        raise UserInputError(f"providers.{name}: unknown provider; installed: {', '.join(sorted(eps)) or 'none'}")
    try:
        return ep.load()
    except ImportError as e:
        raise UserInputError(f"providers.{name}: cannot import its SDK ({e}); install gpuorch[{name}]") from None




def with_volumes(names: Iterable[str]) -> list[str]:
    """Those of ``names`` whose provider class has the ``SupportsVolumes`` capability, or declares
    ``volumes_at_launch`` (found on the class, so no provider is built and no cloud called);
    uninstalled ones have none."""
    from gpuorch.provider.port import SupportsVolumes

    out = []
    for name in sorted(set(names)):
        try:
            cls = provider_class(name)
        except UserInputError:
            continue
        if issubclass(cls, SupportsVolumes) or cls.capabilities.volumes_at_launch:  # or given at launch
            out.append(name)
    return out


def volume_size_ranges(config: dict[str, dict[str, Any]], disk_type: str | None = None,
                       ) -> dict[str, tuple[float, float]]:
    """(min, max) GiB of a volume of ``disk_type`` (None: each provider's default) on each enabled
    provider that says (capability ``disk_types``: ``Provider.volume_size_range``)."""
    out: dict[str, tuple[float, float]] = {}
    for name in with_volumes(config):
        cls = provider_class(name)
        if cls.capabilities.disk_types and (limits := cls.volume_size_range(config[name] or {}, disk_type)):
            out[name] = limits
    return out


def volume_types(config: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    """The disk types a job's ``volume.type`` may name on each enabled provider that says
    (capability ``disk_types``: ``Provider.volume_types``)."""
    out: dict[str, tuple[str, ...]] = {}
    for name in with_volumes(config):
        cls = provider_class(name)
        if cls.capabilities.disk_types:
            out[name] = tuple(cls.volume_types(config[name] or {}))
    return out


def volume_attach_checks(config: dict[str, dict[str, Any]], disk_type: str | None = None,
                         ) -> dict[str, Callable[[str], bool]]:
    """instance type -> whether it can attach ``disk_type`` (None: the provider's default), for
    each enabled provider that says (capability ``disk_types``: ``Provider.volume_attachable``);
    no cloud call."""
    out: dict[str, Callable[[str], bool]] = {}
    for name in with_volumes(config):
        cls = provider_class(name)
        if cls.capabilities.disk_types:
            out[name] = functools.partial(lambda c, o, t, it: c(o, it, t), cls.volume_attachable, config[name] or {},
                                          disk_type)
    return out


def load_provider(name: str, options: dict[str, Any], home: Path) -> Provider:
    return provider_class(name).from_config(options, home)


def catalog_offers(name: str) -> Callable[[dict[str, Any], Path], list[Offer]]:
    """``providers.<name>``'s ``catalog_offers``: the function its adapter's catalog names
    (``AdapterCatalog.offers``, which the class calls too: its provider module is not imported),
    else the class's. Raises UserInputError (unknown provider, its SDK or module missing)."""
    ep = _entry_point(CATALOG_GROUP, name) if _entry_point(GROUP, name) else None  # else: the class's error
    try:  # only this adapter's catalog module (gpuorch.catalog.registry.catalogs loads them all)
        found = ep.load() if ep is not None else None
    except ImportError:
        found = None
    if found is None or found.offers is None:
        return provider_class(name).catalog_offers
    module, _, func = found.offers.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as e:
        raise UserInputError(f"providers.{name}: cannot import its offers {found.offers!r} ({e}); "
                             f"reinstall gpuorch[{name}]") from None


def offline_offers(config: dict[str, dict[str, Any]], home: Path) -> list[Offer]:
    """What the enabled providers sell, without calling any cloud (for `submit`'s fit check):
    each one's ``catalog_offers`` (by default its rows of the shipped catalog)."""
    out: list[Offer] = []
    for name, opts in config.items():
        out.extend(catalog_offers(name)(opts or {}, home))
    return out


def load_providers(config: dict[str, dict[str, Any]], home: Path) -> dict[str, Provider]:
    return {name: load_provider(name, opts or {}, home) for name, opts in config.items()}
