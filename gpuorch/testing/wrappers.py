"""What a wrapper around a port must preserve, and what an adapter must declare.

A wrapper (``gpuorch.metrics.instrument.InstrumentedProvider`` today) stands in for the adapter
everywhere the core looks, so a capability it does not forward is a capability the daemon loses
while the unwrapped adapter in a test still has it (a gang adapter's ``max_nodes`` read as 1,
its gangs then waiting for an offer forever). ``capability_mismatches`` compares a wrapped
adapter with the adapter itself: its declared ``capabilities`` (one value, field by field), each
optional port method a declared flag names, and each Protocol capability.
``declaration_mismatches`` checks an adapter class against itself: every flag that names a port
method is set exactly when the class has its own version of the method, and no attribute of the
flags ``Capabilities`` replaced is left on it (it would be read by nothing).
``tests/harness/test_wrappers.py`` runs both for every shipped wrapper and provider.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import Any

from gpuorch.provider import port
from gpuorch.provider.capabilities import PROVIDER_CLASS_METHODS, PROVIDER_METHODS, Capabilities, field_names
from gpuorch.provider.port import Provider
from gpuorch.runners.port import RUNNER_METHODS, Runner

# The class attributes the declared ``Capabilities`` replaced (issue 32): an adapter still setting
# one declares nothing (the core reads ``capabilities`` only).
RETIRED_FLAGS = ("runner_outlives_instance", "runners_may_block", "launches_may_block", "runs_containers",
                 "max_nodes", "owned_capacity", "price_source")


def declared_attributes() -> tuple[str, ...]:
    """The fields of the port's one declared value, ``Capabilities``."""
    return field_names(Capabilities)


def undeclared_attributes() -> set[str]:
    """Public data attributes of ``Provider`` other than its identity (``name``) and its one
    declared value (``capabilities``): a flag added to the port beside ``Capabilities`` (a wrapper
    would not forward it)."""
    annotated = {n for n in inspect.get_annotations(Provider) if not n.startswith("_")}
    return annotated - {"name", "capabilities"}


def protocol_capabilities() -> list[type]:
    """The port's optional capabilities found with ``isinstance`` (runtime-checkable Protocols)."""
    return [obj for _, obj in inspect.getmembers(port, inspect.isclass)
            if getattr(obj, "_is_runtime_protocol", False) and obj.__module__ == port.__name__]


def bare_instance(cls: type[Provider]) -> Provider:
    """An adapter object of ``cls`` without running its constructor (no SDK client, no cloud):
    enough to read its declared capabilities, which are class attributes."""
    return cls.__new__(cls)


def _own(cls: type, base: type, method: str) -> bool:
    """Whether ``cls`` has its own ``method`` (or a mixin's), not ``base``'s default; class methods
    compared as declared (``getattr`` would bind a new object each time)."""
    return inspect.getattr_static(cls, method, None) is not inspect.getattr_static(base, method)


def _overrides(obj: Any, base: type, method: str) -> bool:
    """Whether ``obj``'s class has its own ``method``, not ``base``'s default."""
    return _own(type(obj), base, method)


def capability_mismatches(adapter: Any, wrapped: Any) -> list[str]:
    """One line per capability where ``wrapped`` answers differently from ``adapter``."""
    mine, theirs = adapter.capabilities, getattr(wrapped, "capabilities", None)
    out = [f"{f.name}: the adapter says {getattr(mine, f.name)!r}, the wrapper {getattr(theirs, f.name, None)!r}"
           for f in fields(Capabilities) if getattr(theirs, f.name, None) != getattr(mine, f.name)]
    for flag, method in PROVIDER_METHODS:
        if getattr(mine, flag) and not _overrides(wrapped, Provider, method):
            out.append(f"{method}: the adapter declares {flag}, the wrapper answers with the port's default")
    for proto in protocol_capabilities():
        has, seen = isinstance(adapter, proto), isinstance(wrapped, proto)
        if has != seen:
            out.append(f"{proto.__name__}: the adapter {'has' if has else 'lacks'} it, the wrapper "
                       f"{'has' if seen else 'lacks'} it")
    return out


def declaration_mismatches(cls: type[Provider] | type[Runner]) -> list[str]:
    """One line per way the class ``cls`` (a Provider or a Runner) declares what it does not do,
    or does what it does not declare (the core would never call the method)."""
    base, methods = ((Provider, PROVIDER_METHODS + PROVIDER_CLASS_METHODS) if issubclass(cls, Provider)
                     else (Runner, RUNNER_METHODS))
    declared, out = cls.capabilities, []
    for flag, method in methods:
        own = _own(cls, base, method)
        if own != bool(getattr(declared, flag)):
            out.append(f"{cls.__name__}: capabilities.{flag} is {getattr(declared, flag)} but the class "
                       f"{'has' if own else 'lacks'} its own {method}")
    out += [f"{cls.__name__}.{name}: a retired flag; declare it in capabilities = Capabilities(...)"
            for name in RETIRED_FLAGS if issubclass(cls, Provider) and hasattr(cls, name)]
    return out
