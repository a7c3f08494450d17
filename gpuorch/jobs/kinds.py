"""What kind of job a stored spec is (``kind`` in gpuorch.jobs.lifetime), stdlib only: ``status``
reads it for every job without importing pydantic."""

from __future__ import annotations

import json


def kind_of(spec_text: str | None) -> str:
    """A stored spec's ``kind`` (``job`` where it names none or cannot be read), without
    validating the whole spec."""
    try:
        data = json.loads(spec_text or "{}")
    except ValueError:
        return "job"
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else "job"
