"""Test kits that ship with gpuorch, for its own tests and for third-party adapters.

- ``contract``: the shared provider contract suite, ``ProviderContract`` (subclass it in a
  test module; requires pytest), and ``wait_until``.
- ``fake_provider``: ``FakeProvider``, a deterministic in-memory cloud (fake clock).
- ``fake_job``: the FakeProvider's jobs and the fake agent that runs them.
- ``faults``: seeded fault injection into a provider's port calls (the sim provider uses it).

The contract names below load on first use (PEP 562), so importing the fakes or the faults
never needs pytest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuorch.testing.contract import ProviderContract, SupportsCapacityControl, wait_until

__all__ = ["ProviderContract", "SupportsCapacityControl", "wait_until"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gpuorch.testing.contract"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
