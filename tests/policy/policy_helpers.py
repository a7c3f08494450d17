"""Helpers for the policy tests: hourly-tick jobs whose costs can be worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpuorch.policy.model import Job

TRACES = Path(__file__).resolve().parents[1] / "data" / "spot-traces" / "aws-p3-2023"


def hourly_job(work_h: float = 4, deadline_h: float = 8, changeover_h: float = 0.5) -> Job:
    """Hourly ticks, spot $1 and on-demand $3 a tick: a cost is a count of ticks."""
    return Job.from_hours(
        work_h=work_h, deadline_h=deadline_h, changeover_h=changeover_h, gap_s=3600, on_demand_price=3, spot_price=1
    )


def trace(*rows: str) -> np.ndarray:
    """``trace("1100")`` -> ``[[True, True, False, False]]``; one string per zone."""
    return np.array([[c == "1" for c in row] for row in rows], dtype=bool)
