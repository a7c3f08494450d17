"""What a wrapper around a port must preserve: every capability the port declares.

A wrapper (``gpuorch.metrics.instrument.InstrumentedProvider`` today) stands in for the adapter
everywhere the core looks, so a capability it does not forward is a capability the daemon loses
while the unwrapped adapter in a test still has it (a gang adapter's ``max_nodes`` read as 1,
its gangs then waiting for an offer forever). ``capability_mismatches`` compares a wrapped
adapter with the adapter itself, capability by capability; ``tests/harness/test_wrappers.py``
runs it for every shipped wrapper around every shipped provider.
"""

from __future__ import annotations

import inspect
from typing import Any

from gpuorch.provider import port
from gpuorch.provider.port import Provider


def declared_attributes() -> tuple[str, ...]:
    """The port's class-attribute capabilities (``Provider.DECLARED_CAPABILITIES``)."""
    return Provider.DECLARED_CAPABILITIES


def undeclared_attributes() -> set[str]:
    """Public data attributes of ``Provider`` missing from ``DECLARED_CAPABILITIES`` (a new flag
    added to the port but not to its list: a wrapper would not copy it). ``name`` is identity."""
    annotated = {n for n in inspect.get_annotations(Provider) if not n.startswith("_")}
    return annotated - set(Provider.DECLARED_CAPABILITIES) - {"name", "DECLARED_CAPABILITIES"}


def protocol_capabilities() -> list[type]:
    """The port's optional capabilities found with ``isinstance`` (runtime-checkable Protocols)."""
    return [obj for _, obj in inspect.getmembers(port, inspect.isclass)
            if getattr(obj, "_is_runtime_protocol", False) and obj.__module__ == port.__name__]


def bare_instance(cls: type[Provider]) -> Provider:
    """An adapter object of ``cls`` without running its constructor (no SDK client, no cloud):
    enough to read its declared capabilities, which are class attributes."""
    return cls.__new__(cls)


def capability_mismatches(adapter: Any, wrapped: Any) -> list[str]:
    """One line per capability where ``wrapped`` answers differently from ``adapter``."""
    out = [f"{name}: the adapter says {getattr(adapter, name)!r}, the wrapper {getattr(wrapped, name, None)!r}"
           for name in declared_attributes() if getattr(wrapped, name, None) != getattr(adapter, name)]
    for proto in protocol_capabilities():
        has, seen = isinstance(adapter, proto), isinstance(wrapped, proto)
        if has != seen:
            out.append(f"{proto.__name__}: the adapter {'has' if has else 'lacks'} it, the wrapper "
                       f"{'has' if seen else 'lacks'} it")
    return out
