"""Which daemons of this home are alive on this host: a lock each holds for its life.

A daemon killed outright (SIGKILL, the OOM killer, a crash of the interpreter) cannot release its
job leases: after systemd restarts it, its jobs waited ``lease_s`` for a new owner, and a job
that ended meanwhile kept its instance billing that long. Each daemon holds an exclusive
``flock`` on ``<home>/daemons/<pid>-<random>.lock`` (which names it) while it runs. The kernel
drops the lock when the process dies, whatever its pid namespace, and a pid reused later holds
nothing. So a lock that another daemon can take belongs to a daemon that is gone
(``Presence.gone``), and the starting daemon expires that daemon's leases at once
(``Daemon.serve``). A lock still held, or a daemon on another host (PostgreSQL HA), is left to
the leases' expiry.
"""

from __future__ import annotations

import fcntl
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("gpuorch.daemon")
DIR = "daemons"
MAX_OWNER_BYTES = 4096  # a daemon's id is host/pid/random: anything longer is not one


@dataclass(frozen=True)
class Gone:
    """A daemon whose lock this process now holds: its id, and the lock to ``forget`` once its
    leases are expired."""

    owner: str
    path: Path
    fd: int

    def forget(self) -> None:
        """Remove the lock file (under its lock, so no other starter reads it half-removed)."""
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)


class Presence:
    """This daemon's lock; ``None`` from ``hold`` where the file system has no ``flock``."""

    def __init__(self, root: Path, path: Path, fd: int) -> None:
        self.root, self.path, self._fd = root, path, fd

    @classmethod
    def hold(cls, home: Path, owner: str) -> Presence | None:
        """Take this daemon's lock: written and locked under a hidden name, then renamed, so every
        ``*.lock`` another daemon finds is held from the moment it appears."""
        root = home / DIR
        name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp, path = root / f".{name}.tmp", root / f"{name}.lock"
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            log.warning("cannot write a presence lock in %s (%s); a crash of this daemon leaves its jobs to "
                        "wait lease_s", root, e)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, owner.encode())
            os.rename(tmp, path)
        except OSError as e:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            log.warning("cannot lock %s (%s); a crash of this daemon leaves its jobs to wait lease_s", tmp, e)
            return None
        return cls(root, path, fd)

    def gone(self) -> list[Gone]:
        """The daemons of this home whose lock is free: each has died. Their locks stay held by
        this process until ``Gone.forget``."""
        out = []
        for path in sorted(self.root.glob("*.lock")):
            if path == self.path:
                continue
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            except OSError:  # removed meanwhile by another starter, or not a file of ours
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                owner = os.read(fd, MAX_OWNER_BYTES + 1).decode("utf-8", "replace")
            except OSError:  # held: that daemon is alive (or this file system cannot say)
                os.close(fd)
                continue
            gone = Gone(owner, path, fd)
            if not owner or len(owner) > MAX_OWNER_BYTES:
                gone.forget()  # not a daemon's id: nothing to expire
                continue
            out.append(gone)
        return out

    def close(self) -> None:
        """A clean stop (its leases released): the lock goes with it."""
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
