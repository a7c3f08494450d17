"""State store: tables, migrations and transactions.

The names below load on first use (PEP 562), so that ``gpuorch.store.states``, ``.paths`` and
``.lite`` import without SQLAlchemy (the cold start of ``gpuorch status``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuorch.store.db import Store
    from gpuorch.store.models import Attempt, Backoff, Checkpoint, Event, Heartbeat, Instance, Job, Meta
    from gpuorch.store.paths import default_home, default_url
    from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

_WHERE = {
    "Store": "db",
    "Attempt": "models", "Backoff": "models", "Checkpoint": "models", "Event": "models", "Instance": "models",
    "Job": "models", "Meta": "models", "Heartbeat": "models",
    "AttemptStatus": "states", "JobStatus": "states", "TerminationReason": "states",
    "default_home": "paths", "default_url": "paths",
}

__all__ = [
    "Attempt",
    "AttemptStatus",
    "Backoff",
    "Checkpoint",
    "Event",
    "Heartbeat",
    "Instance",
    "Job",
    "JobStatus",
    "Meta",
    "Store",
    "TerminationReason",
    "default_home",
    "default_url",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
