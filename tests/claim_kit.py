"""The claim as the reconciler makes it, for the claim tests on SQLite (tests/core) and
PostgreSQL (tests/ha)."""

from __future__ import annotations

from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store.models import Job


def claim(leases: Leases, clock, known: dict[int, Job]) -> list[Job]:  # type: ignore[no-untyped-def]
    """A claim with the rows the caller kept (``HeldRows.jobs``), which it then keeps."""
    got = leases.claim(clock.now(), known=known, queued=200)
    known.clear()
    known.update({j.id: j for j in got})
    return got
