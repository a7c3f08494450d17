"""The status enums of the store's tables, free of SQLAlchemy: the light read path
(``gpuorch.store.lite``) and the summaries use them without importing the ORM."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"  # waiting for an offer
    STARTING = "starting"  # an attempt is being launched or booting
    RUNNING = "running"
    RECOVERING = "recovering"  # the last attempt was preempted; a new one is on its way
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"  # stopped (or never started) so as not to cross a cap
    # Schema 7 (sweeps): a trial stopped cleanly because running trials' reservations, not its
    # spend, filled the cap; it resumes from its checkpoint before fresh trials start.
    HELD = "held"
    PRUNED = "pruned"  # a trial the sweep's pruning rule stopped early (its checkpoint kept)

    @property
    def terminal(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.BUDGET_EXHAUSTED,
                        JobStatus.PRUNED)


class AttemptStatus(StrEnum):
    REQUESTED = "requested"  # intent recorded; the launch call may or may not have happened
    LAUNCHED = "launched"  # the provider returned an instance id
    RUNNING = "running"  # the agent is up
    DRAINING = "draining"  # ended (preempted) but its instance is finishing a final checkpoint
    ENDED = "ended"

    @property
    def live(self) -> bool:
        """A live attempt is the job's one current attempt."""
        return self in (AttemptStatus.REQUESTED, AttemptStatus.LAUNCHED, AttemptStatus.RUNNING)


class TerminationReason(StrEnum):
    SUCCEEDED = "succeeded"  # the job exited 0
    FAILED = "failed"  # the job exited non-zero (or its agent died)
    PREEMPTED = "preempted"  # the cloud reclaimed the instance
    LOST = "lost"  # the instance vanished without a notice or an exit status
    NO_CAPACITY = "no_capacity"  # the launch was refused for capacity or quota
    LAUNCH_FAILED = "launch_failed"  # the launch was refused for good (bad request)
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"  # stopped cleanly before a cost cap was crossed
    MOVED = "moved"  # stopped cleanly by the deadline policy to go on on-demand (schema 4); the job goes on
    HELD = "held"  # stopped cleanly so that reservations fit the sweep's cap (schema 7); the trial goes on later
    PRUNED = "pruned"  # stopped cleanly by the sweep's pruning rule (schema 7)

    def job_status(self) -> JobStatus | None:
        """The job's status when no retry follows (None: the job goes on)."""
        return {
            TerminationReason.SUCCEEDED: JobStatus.SUCCEEDED,
            TerminationReason.FAILED: JobStatus.FAILED,
            TerminationReason.PREEMPTED: JobStatus.FAILED,
            TerminationReason.LOST: JobStatus.FAILED,
            TerminationReason.LAUNCH_FAILED: JobStatus.FAILED,
            TerminationReason.CANCELLED: JobStatus.CANCELLED,
            TerminationReason.BUDGET_EXHAUSTED: JobStatus.BUDGET_EXHAUSTED,
            TerminationReason.PRUNED: JobStatus.PRUNED,
        }.get(self)

    @property
    def counts_as(self) -> str | None:
        """Which retry budget this reason spends: ``preemption``, ``failure`` or none."""
        if self in (TerminationReason.PREEMPTED, TerminationReason.LOST):
            return "preemption"
        if self == TerminationReason.FAILED:
            return "failure"
        return None


class SweepStatus(StrEnum):
    ACTIVE = "active"  # trials queued or running
    DONE = "done"  # every trial has finished
    CANCELLED = "cancelled"
