"""The runner port: how the daemon starts the agent on an instance and reads its status and logs.

One Runner drives one instance. Implementations: ``gpuorch_local`` (processes on this host);
SSH (paramiko) for cloud VMs.

Change is a value, never an identity (DESIGN.md 4): the daemon keeps the statuses a runner
answered and tells whether anything changed by comparing their values (``status_value``, taken
when each answer is read), never by whether ``status`` returned the same object again. A runner
may therefore hand out one object for as long as nothing changed, or keep one and refresh it in
place inside ``status``: both are seen (``RunnerContract`` shows it with ``InPlaceStatusRunner``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

from gpuorch.agent.protocol import AgentConfig, AgentStatus

StatusValue = tuple[object, ...]
_PLAIN = frozenset({"str", "int", "float", "bool", "None"})  # field types compared as they are


def _part(name: str, annotation: object) -> str:
    """How ``status_value`` takes one field: as it is, a list by its length and last item, else by ``repr``."""
    types = {t.strip() for t in str(annotation).split("|")}
    if types <= _PLAIN:
        return f"s.{name}"
    if all(t.startswith("list") for t in types - {"None"}):
        return f"len(s.{name} or ()), (s.{name} or (None,))[-1]"
    return f"None if s.{name} is None else repr(s.{name})"


def _status_value() -> Callable[[AgentStatus], StatusValue]:
    """``status_value``'s body written out over ``AgentStatus``'s fields, as ``dataclasses`` writes
    ``__eq__`` (the names are the dataclass's own): a loop over the fields costs five times as much."""
    namespace: dict[str, Any] = {}
    exec(f"def value(s):\n    return ({', '.join(_part(f.name, f.type) for f in fields(AgentStatus))},)\n", namespace)
    return cast(Callable[[AgentStatus], StatusValue], namespace["value"])


_value = _status_value()


def status_value(status: AgentStatus | None) -> StatusValue | None:
    """What the daemon compares of two status answers: equal values say nothing changed, whether
    or not the answers are one object. A flat tuple, taken in a fifth of a microsecond (the
    steady pass takes one a running agent a pass): each plain field as it is; each list
    (``uploaded``, ``refused``) by its length and last item, which is how the agent changes them
    (it only appends); any other field (``result``) by its ``repr`` once set (None while the job
    runs: nothing to format). A copy, so refreshing the status in place later never changes a
    value taken before."""
    return None if status is None else _value(status)


class RunnerUnavailable(Exception):
    """The instance cannot be reached yet (booting, network). Try again on a later pass."""


class VolumeNotReady(RunnerUnavailable):
    """The job's volume is not usable on the instance yet (its device has not appeared since the
    attach). Try again on a later pass: the caller bounds how long (the reconciler's
    ``volume_wait_s``, counted from the attempt's ``volume_attached_at``)."""

    def __init__(self, volume_id: str, path: str, why: str) -> None:
        super().__init__(f"volume {volume_id} at {path}: {why}")
        self.volume_id, self.path, self.why = volume_id, path, why


class VolumeMountFailed(Exception):
    """The job's volume cannot be mounted on this instance and trying again will not help (data
    without a filesystem, another device at the path, a bad volume id or path...). Not a
    RunnerUnavailable: the attempt is over (the reconciler ends it and terminates the instance)."""

    def __init__(self, volume_id: str, path: str, why: str) -> None:
        super().__init__(f"volume {volume_id} at {path}: {why}")
        self.volume_id, self.path, self.why = volume_id, path, why


@dataclass(frozen=True)
class RunnerCapabilities:
    """A runner's declared capabilities (as ``gpuorch.provider.capabilities.Capabilities`` for a
    provider): each flag says the runner has its own version of the port method it names, which
    the core calls only then."""

    # ``Runner.listed_heartbeat``: a heartbeat that trusts the pass's listing that the instance is
    # alive (a local runner then need not read its instance record again).
    listed_heartbeat: bool = False


# The optional port methods each flag stands for: (flag, method name).
RUNNER_METHODS: tuple[tuple[str, str], ...] = (("listed_heartbeat", "listed_heartbeat"),)


class Runner(ABC):
    # Declared once on each runner class; the core reads ``runner.capabilities.X``.
    capabilities: RunnerCapabilities = RunnerCapabilities()

    @abstractmethod
    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Place the agent (and ``workdir``'s files) on the instance and start it detached.

        Idempotent: if the agent for ``config.attempt`` was already started, does nothing.
        Raises RunnerUnavailable while the instance is not reachable. A runner that mounts the
        job's volume (``config.volume_id``) first never waits for it: it raises VolumeNotReady
        (a RunnerUnavailable) while the device is not there yet, and VolumeMountFailed when it
        cannot be mounted for good; the agent is not started in either case.
        """

    @abstractmethod
    def status(self) -> AgentStatus | None:
        """The agent's latest status, or None if it has not written one yet.

        A value: the daemon keeps each answer and compares answers by ``status_value``, never by
        identity. So the answer may be the very object of the last call while nothing changed (the
        local runner parses ``status.json`` only when it changed), or one object the runner
        refreshes in place inside this call; either way a change is seen. What a runner must not
        do is change an answer outside this call (from a thread of its own, say): the daemon may
        be reading it then. Raises RunnerUnavailable while the instance is not reachable.
        """

    @abstractmethod
    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        """Job output from byte ``offset``; returns (data, next offset). Empty if none yet."""

    def heartbeat(self) -> None:  # noqa: B027 - optional
        """Tell the agent the control host is alive (feeds its dead-man switch)."""

    def listed_heartbeat(self) -> None:
        """Capability ``listed_heartbeat``: ``heartbeat`` for an instance the pass's listing just
        showed alive (a runner may then skip its own look at the instance). Default: ``heartbeat``."""
        self.heartbeat()

    def request_stop(self, deadline: float) -> None:
        """Ask the agent to take a final checkpoint and stop the job by ``deadline`` (epoch s).

        The agent handles it like a preemption notice (signal, upload, hand-off), then stops the
        job and exits. Idempotent; an earlier call's deadline stands. The agent reads the file
        ``stop.json`` (``protocol.STOP_FILE``, ``{"deadline": epoch}``) in its run dir: local
        runners write it in place, an SSH runner writes it atomically over SFTP (temp + rename).
        Raises RunnerUnavailable while the instance is not reachable, NotImplementedError where
        the runner cannot (the daemon then terminates the instance without a final checkpoint).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot request a clean stop")

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        """The job's metrics file (JSON lines, ``$GPUORCH_METRICS_FILE``) from byte ``offset``,
        like ``read_log``. Empty if the job has written none."""
        return b"", offset
