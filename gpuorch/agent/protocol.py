"""What the daemon and the on-instance agent exchange: stdlib only, so the agent runs anywhere.

The runner writes ``agent.json`` (an ``AgentConfig``) into the attempt's run directory and starts
``python -m gpuorch.agent <rundir>``; the agent keeps ``status.json`` (an ``AgentStatus``)
up to date there, atomically (write to a temp file, then rename), and appends the job's output
to ``job.log`` and its own to ``agent.log``.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from gpuorch.agent import limits
from gpuorch.agent.container import ContainerConfig

CONFIG_FILE = "agent.json"
STATUS_FILE = "status.json"
JOB_LOG = "job.log"
AGENT_LOG = "agent.log"
WORK_DIR = "work"  # the job's working directory inside the run dir (uploaded workdir lands here)
HEARTBEAT_FILE = "heartbeat"  # touched by the daemon; the dead-man switch reads its mtime
STOP_FILE = "stop.json"  # written by the daemon: {"deadline": epoch}: final checkpoint, then stop
METRICS_FILE = "metrics.jsonl"  # $GPUORCH_METRICS_FILE: JSON lines of metrics the job appends
CONTAINERS_FILE = "containers.jsonl"  # {"runtime": [...], "name": ...} per container the agent started


@dataclass
class NoticeSource:
    """Where the agent learns of an upcoming preemption.

    kind ``file``: a JSON file ``{"deadline": <epoch seconds>}`` appears at ``path`` (local/sim);
    kind ``aws``: IMDSv2 ``spot/instance-action`` at ``url`` (default http://169.254.169.254);
    kind ``gcp``: the metadata server's ``instance/preempted`` at ``url`` (default
    http://metadata.google.internal), deadline 30 s after it first reads TRUE;
    kind ``azure``: Scheduled Events at ``url`` (default http://169.254.169.254), a ``Preempt``
    event's ``NotBefore`` as the deadline;
    kind ``none``: never.
    """

    kind: str = "none"
    path: str | None = None
    url: str | None = None
    poll_s: float = 1.0


@dataclass
class AgentConfig:
    job_id: int
    attempt: int
    job_name: str
    run: str
    setup: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    checkpoint_dir: str = "checkpoints"  # relative to the run dir's work/ unless absolute
    checkpoint_url: str | None = None  # this job's prefix in the checkpoint store
    sync_interval_s: float = 60.0
    keep_checkpoints: int = 3
    signal: str = "SIGUSR1"
    notice: NoticeSource = field(default_factory=NoticeSource)
    # On a relaunch after a notice: wait (until this epoch time at most) for the previous
    # attempt's final checkpoint before restoring, so the new attempt resumes from it.
    predecessor_attempt: int | None = None
    predecessor_deadline: float | None = None
    # Dead-man switch: no heartbeat from the control host for this long -> final checkpoint,
    # then shut down. None disables it (local runs).
    heartbeat_timeout_s: float | None = None
    shutdown_command: str | None = None  # e.g. "sudo shutdown -h now" on a cloud VM
    final_checkpoint_grace_s: float = 5.0  # kept in reserve before the notice deadline
    # The job's volume (spec ``volume:``) and where it goes: a runner that can (SSH, for EBS)
    # mounts it there before starting the agent. The job also sees the path as GPUORCH_VOLUME_DIR.
    volume_id: str | None = None
    volume_dir: str | None = None
    # Spec ``image:``: setup and run execute in this container (``gpuorch.agent.container``).
    container: ContainerConfig | None = None
    # False on the nodes of a multi-node gang other than node 0: they restore the job's
    # checkpoint but never upload or hand off (rank 0's checkpoint is the job's).
    upload_checkpoints: bool = True
    # Whose checkpoints these are (docs/checkpoints.md "Namespaces"): the daemon's installation
    # id, written into every manifest and required of every restore. None (an agent run by hand):
    # manifests that name no owner are accepted as before. ``legacy_checkpoint_url``: a job stored
    # before namespacing also resumes from its old prefix, only the checkpoints the daemon recorded
    # for it (``legacy_checkpoints``: name, attempt, step, completed_at).
    installation: str | None = None
    legacy_checkpoint_url: str | None = None
    legacy_checkpoints: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self, indent: int | None = 2) -> str:
        """``indent=None``: compact, for writers in a hot path (an indent takes json's pure-Python encoder)."""
        return _encode(self, indent)

    @classmethod
    def from_json(cls, text: str) -> AgentConfig:
        data = json.loads(text)
        data["notice"] = NoticeSource(**data.get("notice") or {})
        if data.get("container"):
            data["container"] = ContainerConfig(**_known(ContainerConfig, data["container"]))
        return cls(**_known(cls, data))


@dataclass
class AgentStatus:
    state: str = "starting"  # starting, pulling (an image), restoring, setup, running, checkpointing, exited, failed
    pid: int | None = None  # the job's process group
    started_at: float | None = None
    running_since: float | None = None  # when this attempt's job command started (after restore)
    restored_from: str | None = None  # checkpoint name this attempt resumed from
    last_checkpoint: str | None = None  # newest checkpoint durable in the store
    last_checkpoint_at: float | None = None  # when the job finished writing it (epoch)
    last_checkpoint_step: int | None = None
    uploaded: list[str] = field(default_factory=list)
    notice_at: float | None = None
    notice_deadline: float | None = None
    notice_reason: str | None = None  # "preemption" (cloud notice), "heartbeat" (dead-man), "sigterm"
    final_checkpoint: str | None = None  # uploaded after the notice
    final_done: bool = False  # the agent has done all it will do for the notice
    exit_code: int | None = None
    result: dict[str, Any] | None = None  # the JSON the job wrote to $GPUORCH_RESULT_FILE, if any
    result_dropped: str | None = None  # why that result was not kept (gpuorch.agent.limits); result says so too
    ended_at: float | None = None
    error: str | None = None
    updated_at: float | None = None
    refused: list[str] = field(default_factory=list)  # checkpoints/records not this job's, and why (events)

    def to_json(self) -> str:
        return _encode(self)

    @classmethod
    def from_json(cls, text: str) -> AgentStatus:
        """ValueError for what is not a status, or nests deeper than ``limits.STATUS_MAX_DEPTH``."""
        return cls(**_known(cls, limits.loads(text, limits.STATUS_MAX_DEPTH)))


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name, for the encoders' ``default``: json's C encoder walks the
    lists and dicts itself and asks this only of a dataclass (``dataclasses.asdict`` deep-copied
    every value, a walk in Python built the same dicts again: each was a seventh of a sim agent's
    start). Anything else is not JSON, as ``json.dumps`` says."""
    cls = type(value)
    names = _FIELDS.get(cls)
    if names is None:
        if not is_dataclass(cls):
            raise TypeError(f"Object of type {cls.__name__} is not JSON serializable")
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return {name: getattr(value, name) for name in names}


_COMPACT = json.JSONEncoder(sort_keys=True, default=_fields_of)  # json.dumps(..., sort_keys=True)'s output
_INDENTED = json.JSONEncoder(sort_keys=True, indent=2, default=_fields_of)


def _encode(value: Any, indent: int | None = None) -> str:
    if indent is None:
        return _COMPACT.encode(value)
    if indent == 2:
        return _INDENTED.encode(value)
    return json.JSONEncoder(sort_keys=True, indent=indent, default=_fields_of).encode(value)


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


_TMP_SEQ = itertools.count()  # temp names: this process's pid and a number (O_EXCL settles the rest)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def write_atomic(path: str | os.PathLike[str], text: str, durable: bool = True) -> None:
    """Readers see the old or the new content, never a torn file. ``durable``: fsync'd before
    the rename, so it also survives a crash of the host (without: of any process only).

    The temp file (mode 0600, beside ``path``) is made with ``os.open`` and written as bytes, not
    through ``tempfile.mkstemp`` and a text file object: those were most of the cost of a small
    write (a sim agent's start, the agent's every status)."""
    folder, name = os.path.split(os.fspath(path))
    data = memoryview(text.encode())
    while True:
        tmp = os.path.join(folder, f".{name}.{os.getpid()}-{next(_TMP_SEQ)}")
        try:
            fd = os.open(tmp, _CREATE, 0o600)
            break
        except FileExistsError:  # a stale one of an earlier process with this pid: the next number
            continue
    try:
        try:
            while data:
                data = data[os.write(fd, data):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_status(rundir: Path) -> AgentStatus | None:
    """The agent's status in ``rundir`` (``status_from_bytes``); None before it wrote one."""
    try:
        with open(rundir / STATUS_FILE, "rb") as f:
            return status_from_bytes(f.read(limits.STATUS_MAX_BYTES + 1))
    except FileNotFoundError:
        return None


def status_from_bytes(data: bytes) -> AgentStatus | None:
    """A status file's bytes, read up to ``limits.STATUS_MAX_BYTES + 1``, as the daemon takes them
    (it never trusts an agent): None if it is not a status (damaged, or not ours: as if not written
    yet); a ``failed`` status naming the limit if it is over ``STATUS_MAX_BYTES`` or nests deeper
    than ``STATUS_MAX_DEPTH`` (only a broken agent writes one: ours bounds the result within it)."""
    if len(data) > limits.STATUS_MAX_BYTES:
        most = limits.size_text(limits.STATUS_MAX_BYTES)
        return AgentStatus(state="failed", error=f"{STATUS_FILE} is over the {most} the daemon reads; the agent is "
                           "broken")
    try:
        text = data.decode("utf-8")
        if limits.depth_over(text, limits.STATUS_MAX_DEPTH):
            return AgentStatus(state="failed", error=f"{STATUS_FILE} nests deeper than {limits.STATUS_MAX_DEPTH} "
                               "levels; the agent is broken")
        return AgentStatus(**_known(AgentStatus, limits.loads(text, limits.STATUS_MAX_DEPTH)))
    except (ValueError, TypeError, AttributeError):
        return None
