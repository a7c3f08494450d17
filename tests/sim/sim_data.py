"""The sim tests' data: the shipped p3 traces and prices, and synthetic traces. A module of its
own name, not ``conftest``: test directories share one ``sys.path``, and another directory's
``conftest`` would answer ``from conftest import ...`` when both are collected in one run."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = DATA / "spot-traces" / "aws-p3-2023"
PRICES = DATA / "spot-prices" / "aws-p3-2023"


def write_trace(path: Path, data: list[int], gap_s: float = 60.0) -> Path:
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap_s}, "data": data}))
    return path
