"""How many times a job ran, as status shows it (issue 31: ``ATTEMPTS 29`` for a trial that ran 3
times). Every launch is an attempt row, a launch the provider refused for capacity or quota
included; users count the ones that got an instance.

- ``runs``: attempts that got an instance (``money.cost.ran``: billed from their launch);
- ``tries``: every attempt, refused launches included (``attempts`` in older JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuorch.money.cost import Billed, ran


def counts(attempts: Iterable[Billed]) -> dict[str, int]:
    """``{"runs", "tries"}`` of one job's attempts."""
    rows = list(attempts)
    return {"runs": sum(1 for a in rows if ran(a)), "tries": len(rows)}


def runs_label(d: Mapping[str, Any]) -> str:
    """``3``, or ``3 (29 tries)`` when launches were refused. A server older than the ``runs``
    field reports ``attempts`` only: shown as they are."""
    tries = d.get("tries", d["attempts"])
    runs = d.get("runs", tries)
    return str(runs) if runs == tries else f"{runs} ({tries} {'try' if tries == 1 else 'tries'})"
