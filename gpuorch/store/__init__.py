"""State store: tables, migrations and transactions."""

from .db import Store, default_home, default_url
from .models import (
    Attempt,
    AttemptStatus,
    Backoff,
    Checkpoint,
    Event,
    Instance,
    Job,
    JobStatus,
    Meta,
    TerminationReason,
)

__all__ = [
    "Attempt",
    "AttemptStatus",
    "Backoff",
    "Checkpoint",
    "Event",
    "Instance",
    "Job",
    "JobStatus",
    "Meta",
    "Store",
    "TerminationReason",
    "default_home",
    "default_url",
]
