"""What a reconcile pass decided to do. Pure data: ``decide`` returns these, ``apply`` does them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from gpuorch.agent.protocol import AgentStatus
from gpuorch.placement import Candidate
from gpuorch.provider.port import Instance
from gpuorch.store.states import JobStatus, TerminationReason


@dataclass(frozen=True)
class Launch:
    """Record a new attempt (intent first), then ask the provider for its instance.

    ``candidates`` in order of preference: when one has no capacity the next is tried, each as a
    new attempt. ``predecessor``: the preempted attempt whose final checkpoint this one awaits.
    """

    candidates: tuple[Candidate, ...]
    predecessor: int | None = None
    predecessor_deadline: datetime | None = None


@dataclass(frozen=True)
class Relaunch:
    """Repeat the launch call of an attempt recorded as requested (idempotent by client token)."""

    attempt: int


@dataclass(frozen=True)
class Adopt:
    """The provider has an instance for a requested attempt: record it."""

    attempt: int
    instance: Instance


@dataclass(frozen=True)
class StartAgent:
    attempt: int


@dataclass(frozen=True)
class Progress:
    """Record what the agent reported: running, restored checkpoint, new checkpoints."""

    attempt: int
    status: AgentStatus


@dataclass(frozen=True)
class Drain:
    """A preemption notice: the attempt is over for the job, but its instance is still uploading
    the final checkpoint until ``until``."""

    attempt: int
    notice_at: datetime
    until: datetime


@dataclass(frozen=True)
class End:
    attempt: int
    reason: TerminationReason
    message: str
    exit_code: int | None = None
    result: dict | None = None
    lost_work_s: float | None = None
    status: AgentStatus | None = None


@dataclass(frozen=True)
class Terminate:
    attempt: int
    instance_id: str


@dataclass(frozen=True)
class KeepWarm:
    """The attempt ended and its instance stays up, idle, until ``until`` for the next job that
    fits it (spec ``keep_warm``, ``decide/warm.py``): handed to the warm pool, not terminated."""

    attempt: int
    instance_id: str
    until: datetime


@dataclass(frozen=True)
class SetJob:
    status: JobStatus
    message: str | None = None
    not_before: datetime | None = None
    finished: bool = False


@dataclass(frozen=True)
class Heartbeat:
    attempt: int


@dataclass(frozen=True)
class StopCleanly:
    """Ask the agent for a final checkpoint and a stop by ``until``; the attempt drains, and ends
    with ``reason`` once the checkpoint is up (or at ``until``). The job takes ``job_status``."""

    attempt: int
    until: datetime
    reason: TerminationReason
    job_status: JobStatus
    message: str
    not_before: datetime | None = None


@dataclass(frozen=True)
class Note:
    """Record an event about a decision (e.g. the deadline policy's choice and its reason)."""

    kind: str
    message: str
    attempt: int | None = None
    data: dict = field(default_factory=dict)


Action = (Launch | Relaunch | Adopt | StartAgent | Progress | Drain | End | Terminate | SetJob | Heartbeat | StopCleanly
          | Note | KeepWarm)


class Step(NamedTuple):  # a tuple: made several times per job per pass, so cheap to make
    """What one sub-step of ``decide`` concluded: its actions, how soon it wants the job looked at
    again (None: no opinion) and whether ``decide`` stops after it (``done``)."""

    actions: tuple[Action, ...] = ()
    requeue_after: float | None = None
    done: bool = False


GO_ON = Step()  # nothing to add; the next sub-step decides


def done(*actions: Action, requeue_after: float | None = None) -> Step:
    return Step(actions, requeue_after, True)


@dataclass
class Decision:
    actions: list[Action] = field(default_factory=list)
    requeue_after: float = 30.0

    def add(self, action: Action) -> None:
        self.actions.append(action)

    def soon(self, seconds: float) -> None:
        self.requeue_after = min(self.requeue_after, seconds)

    def take(self, step: Step) -> bool:
        """Add a sub-step's actions and requeue time; True if ``decide`` stops here."""
        self.actions.extend(step.actions)
        if step.requeue_after is not None:
            self.soon(step.requeue_after)
        return step.done
