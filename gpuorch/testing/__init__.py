"""Test kits that ship with gpuorch, for its own tests and for third-party adapters.

- ``contract``: the shared provider contract suite, ``ProviderContract`` (subclass it in a
  test module; requires pytest), and ``wait_until``.
- ``runner_contract``: ``RunnerContract``, the runner port's suite (local, SSH, fake runners).
- ``volume_contract``: ``VolumeContract``, the suite of the ``SupportsVolumes`` capability.
- ``gang_contract``: ``GangContract``, the gang section every adapter with ``max_nodes > 1`` passes.
- ``import_contracts``: the ``allowlist`` import-linter contract (the adapter kit rule).
- ``fake_provider``: ``FakeProvider``, a deterministic in-memory cloud (fake clock).
- ``fake_job``: the FakeProvider's jobs and the fake agent that runs them.
- ``crash``: ``kill_at``, a real daemon process SIGKILLed at a crash point (every adapter's crash test).
- ``faults``: seeded fault injection into a provider's port calls (the sim provider uses it).

The contract names below load on first use (PEP 562), so importing the fakes or the faults
never needs pytest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuorch.testing.contract import ProviderContract, SupportsCapacityControl, wait_until
    from gpuorch.testing.gang_contract import GangContract
    from gpuorch.testing.runner_contract import RunnerContract
    from gpuorch.testing.volume_contract import VolumeContract

_HOMES = {
    "ProviderContract": "contract", "SupportsCapacityControl": "contract", "wait_until": "contract",
    "RunnerContract": "runner_contract", "VolumeContract": "volume_contract", "GangContract": "gang_contract",
}
__all__ = ["GangContract", "ProviderContract", "RunnerContract", "SupportsCapacityControl", "VolumeContract",
           "wait_until"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"gpuorch.testing.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
