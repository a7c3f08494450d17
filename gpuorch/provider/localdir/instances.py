"""One local instance on disk: ``<home>/instances/<id>/``.

    meta.json    the instance record (``Meta``): tags, offer, market, state, times, client token
    notice.json  ``{"deadline": epoch}`` once a preemption was injected (the agent watches it)
    run/         the agent's run directory (agent.json, status.json, job.log, work/, agent.pid)
    .lock        flock'd around every read-modify-write of meta.json (a hard link to the first
                 record's file: see ``create``; an older instance's is an empty file of its own)

An instance whose record names a ``run_as`` user (``isolation``) runs its agent and job as that
user: the directory is root's, 0711; ``run/`` is the user's; ``notice.json`` is readable to it. A
process of that user cannot take the lock or write the record, so the dead-man switch's
shutdown, run by the agent, leaves ``run/powered-off`` instead (``gpuorch_local.isolation``), and
the next look by the daemon (``observe``) ends the instance as of that file's time.

meta.json is only ever replaced whole (temp file + rename), so readers need no lock; writers
take the lock so a terminate and a preemption reaper racing each other cannot lose an update.
The one state that is not written down is PENDING -> RUNNING: it follows from ``ready_at``.

Where the instances' directory holds a change log (``<home>/instances/.changes``, made by a
provider that lists from it: the sim), every record written, by any process, then appends the
instance's id to it, a line each (``note_change``): a listing reads only the records named
since it last looked instead of every record (``gpuorch_sim.cloud.Instances.changes``).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuorch.agent.protocol import read_status, write_atomic
from gpuorch.clock import utcnow
from gpuorch.errors import NotFoundError
from gpuorch.provider.port import Instance, InstanceState, Offer

from .isolation import TRAVERSE_DIR, RunAs
from .procs import kill_instance

META_FILE = "meta.json"
NOTICE_FILE = "notice.json"
RUN_DIR = "run"
AGENT_PID_FILE = "agent.pid"
POWERED_OFF_FILE = "powered-off"  # in run/: an isolated instance's agent shut it down (see above)
REASON_SHUTDOWN = "shutdown-by-agent"
REASON_PREEMPTED = "spot-interruption"
REASON_TERMINATED = "terminated-by-request"
LOCK_FILE = ".lock"
_LOCK_OPEN = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # as open(path, "a")
CHANGES_FILE = ".changes"  # in the instances' directory, where a provider keeps one (see above)


class Meta(BaseModel):
    """What ``meta.json`` holds. Unknown keys are ignored so older daemons read newer records."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    client_token: str
    tags: dict[str, str]
    offer: Offer
    spot: bool
    state: InstanceState
    state_reason: str | None = None
    created_at: datetime
    ready_at: datetime  # boot done: PENDING reads RUNNING from here on
    preemption_deadline: datetime | None = None
    ended_at: datetime | None = None
    run_as: RunAs | None = None  # the user its agent and job run as (None: the daemon's)

    def observed(self, now: datetime) -> Meta:
        """The record with its boot accounted for (no side effects)."""
        if self.state == InstanceState.PENDING and now >= self.ready_at:
            return self.model_copy(update={"state": InstanceState.RUNNING})
        return self

    def preemption_due(self, now: datetime) -> bool:
        """Alive on paper although its preemption deadline has passed: to be reclaimed now."""
        return self.state.alive and self.preemption_deadline is not None and now >= self.preemption_deadline

    def to_instance(self, state: InstanceState | None = None) -> Instance:
        """The port's ``Instance``; ``state``: as observed (``observed``'s, without its copy of the record)."""
        o = self.offer
        return Instance(
            id=self.id, provider=o.provider, region=o.region, zone=o.zone, instance_type=o.instance_type,
            spot=self.spot, state=state or self.state, tags=dict(self.tags), created_at=self.created_at,
            host=None, state_reason=self.state_reason, preemption_deadline=self.preemption_deadline,
            ended_at=self.ended_at,
        )


# Records of one offer share one ``Offer`` (frozen) and their tag names one string each: a
# daemon keeps a record per instance (the sim's listing cache), and the offer was most of it
# (~1.8 KB of ~3 KB an instance). Bounded: cleared when a catalog's worth of offers is exceeded.
_OFFERS: dict[tuple[tuple[str, object], ...], Offer] = {}
_OFFERS_MAX = 4096


def parse_meta(text: str | bytes) -> Meta:
    """``Meta`` from ``meta.json``'s text or bytes (ValueError if it is not one): parsed and
    validated in one step (pydantic's JSON parser), then its offer and tag names shared."""
    meta = Meta.model_validate_json(text)
    key = tuple(meta.offer.__dict__.items())  # an Offer's values: strings, numbers, None
    offer = _OFFERS.get(key)
    if offer is None:
        if len(_OFFERS) >= _OFFERS_MAX:
            _OFFERS.clear()
        offer = _OFFERS[key] = meta.offer
    # The record is frozen; these are the very values it holds, shared (as spec.py shares fields sets).
    object.__setattr__(meta, "offer", offer)
    object.__setattr__(meta, "tags", {sys.intern(k): v for k, v in meta.tags.items()})
    return meta


class InstanceDir:
    """The files of one local instance, and the only code that changes them."""

    durable = True  # records fsync'd (write_atomic); the sim's need only survive a process's crash
    indent: int | None = 2  # the records' JSON, for a person to read; the sim's: compact (a tenth of its launch)

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def id(self) -> str:
        return self.path.name

    @cached_property
    def _where(self) -> str:
        """The directory's path as a string: what the file calls of a launch take (no Path joins)."""
        return os.fspath(self.path)

    @cached_property
    def meta_file(self) -> Path:
        return self.path / META_FILE

    @cached_property
    def notice_file(self) -> Path:
        return self.path / NOTICE_FILE

    @cached_property
    def lock_file(self) -> str:
        return os.path.join(self.path, LOCK_FILE)

    @cached_property
    def run_dir(self) -> Path:
        return self.path / RUN_DIR

    @property
    def agent_pid_file(self) -> Path:
        return self.run_dir / AGENT_PID_FILE

    # -- the record ------------------------------------------------------------------------
    def read(self) -> Meta:
        """The stored record. Raises NotFoundError if there is none."""
        try:
            with open(self.meta_file, "rb") as f:  # bytes: json reads UTF-8 itself, no text layer
                data = f.read()
        except FileNotFoundError:
            raise NotFoundError(f"local instance {self.id} not found") from None
        return parse_meta(data)

    def observe(self, now: datetime | None = None) -> Meta:
        """The record as the instance is now: booted if its boot time passed, and reclaimed (its
        processes killed) if a preemption deadline passed even though no reaper acted on it."""
        now = now or utcnow()
        meta = self.read().observed(now)
        if meta.run_as is not None and meta.state.alive and (off := self._powered_off()) is not None:
            meta = self.end(InstanceState.TERMINATED, REASON_SHUTDOWN, min(now, off))
        if meta.preemption_due(now):  # reclaimed at its deadline, whenever a look gets to it
            meta = self.end(InstanceState.PREEMPTED, REASON_PREEMPTED, min(now, meta.preemption_deadline or now))
        return meta

    def create(self, meta: Meta) -> bool:
        """Write the record and the directory in one step. False if the id already exists.

        The directory is assembled under a hidden name and renamed into place, so a crash never
        leaves an instance without its record, and of two concurrent launches exactly one wins.
        """
        parent, name = os.path.split(self._where)
        staging = os.path.join(parent, f".staging-{name}-{secrets.token_hex(4)}")
        try:
            os.mkdir(staging)
        except FileNotFoundError:  # the first instance: its parents too
            os.makedirs(staging)
        if meta.run_as is not None:
            os.chmod(staging, TRAVERSE_DIR)  # its user passes through to run/ and notice.json
        try:
            # The staging directory is nobody's yet: its record needs no temp file and rename of
            # its own (the directory's rename is the atomic step), only the fsync of a durable one.
            fd = os.open(os.path.join(staging, META_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                data = memoryview(meta.model_dump_json(indent=self.indent).encode())
                while data:
                    data = data[os.write(fd, data):]
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            # The lock's file is a second name of this first record's: an flock is on an inode,
            # and a file of its own cost a launch another inode allocation, which on ext4 is the
            # dearest step of it (meta.json is only ever replaced, so this inode stays the lock's).
            try:
                os.link(os.path.join(staging, META_FILE), os.path.join(staging, LOCK_FILE))
            except OSError:  # a file system without hard links: ``locked`` makes a file of its own
                pass
            os.rename(staging, self._where)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if self.meta_file.exists():
                return False  # ENOTEMPTY/EEXIST: another launch got there first
            raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self.note_change()
        return True

    def note_change(self) -> None:
        """Append this instance's id to the change log, if its directory keeps one (after the
        record's write: a reader that sees the line reads the new record)."""
        parent, name = os.path.split(self._where)
        try:
            fd = os.open(os.path.join(parent, CHANGES_FILE), os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            return
        try:
            os.write(fd, f"{name}\n".encode())
        finally:
            os.close(fd)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the instance's lock (not re-entrant: flock locks belong to one open file)."""
        try:  # a plain descriptor: flock needs no file object
            fd = os.open(self.lock_file, _LOCK_OPEN, 0o666)
        except FileNotFoundError:
            raise NotFoundError(f"local instance {self.id} not found") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # lets the lock go

    def update(self, change: Callable[[Meta], Meta]) -> Meta:
        """Read, change and write the record under the instance's lock; returns what was written."""
        with self.locked():
            return self._write(change(self.read()))

    def _write(self, meta: Meta) -> Meta:
        write_atomic(self.meta_file, meta.model_dump_json(indent=self.indent), self.durable)
        self.note_change()
        return meta

    def announce(self, deadline: datetime, now: datetime | None = None) -> Meta:
        """A preemption notice: record ``deadline`` (a later notice may move it earlier, never
        later) and write ``notice.json`` for the agent, unless the instance already ended.
        Returns the record as observed now. Carrying out the kill is the caller's business."""
        now = now or utcnow()

        def change(meta: Meta) -> Meta:
            earlier = meta.preemption_deadline is None or deadline < meta.preemption_deadline
            if meta.observed(now).state.alive and earlier:
                return meta.model_copy(update={"preemption_deadline": deadline})
            return meta

        meta = self.update(change).observed(now)
        if meta.state.alive and meta.preemption_deadline is not None:
            write_atomic(self.notice_file, json.dumps({"deadline": meta.preemption_deadline.timestamp()}) + "\n",
                         self.durable)
            if meta.run_as is not None:
                os.chmod(self.notice_file, 0o644)  # the agent's to read (a new file is 0600)
        return meta

    # -- the end of an instance ------------------------------------------------------------
    def end(self, state: InstanceState, reason: str, now: datetime | None = None) -> Meta:
        """Kill every process of the instance, then record ``state`` unless it already ended.

        Both under the lock that ``LocalRunner.start`` holds while it spawns the agent, so an
        agent is either killed here or never started. Kill first, record second: a crash in
        between leaves an alive record that the next call ends again, never an ended record with
        processes still running. An ended instance keeps its first ending (a preempted instance
        that is later terminated still reads PREEMPTED).
        """
        now = now or utcnow()
        with self.locked():
            self.kill()
            meta = self.read()
            if not meta.observed(now).state.alive:
                return meta
            return self._write(meta.model_copy(update={"state": state, "state_reason": reason, "ended_at": now}))

    def _powered_off(self) -> datetime | None:
        try:
            return datetime.fromtimestamp(os.stat(self.run_dir / POWERED_OFF_FILE).st_mtime, tz=UTC)
        except FileNotFoundError:
            return None

    def kill(self) -> None:
        """SIGKILL the agent's and the job's process groups (the pids they recorded)."""
        from gpuorch.agent.job import remove_containers  # the agent's job module: only when killing

        agent_pid = _read_pid(self.agent_pid_file)
        status = read_status(self.run_dir)
        kill_instance(self.path, [agent_pid, status.pid if status else None])
        remove_containers(self.run_dir)  # a job's container outlives its killed runtime client


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
