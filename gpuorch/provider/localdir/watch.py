"""Which agents wrote something since the last look: a change signal for run directories (issue 18).

A steady pass over 10,000 local or sim instances used to ``stat`` three files of each agent's run
directory (``status.json``, ``job.log``, ``metrics.jsonl``) to learn that nothing changed. Linux's
inotify tells instead: one watch a run directory, and a pass reads the events queued since the
last one (a non-blocking ``read``; nothing queued costs one system call for all of them).

The answer is conservative. ``changes`` returns None ("anything may have changed: read
everything") when it cannot tell: inotify missing (not Linux, or the library call fails), the
kernel's queue overflowed, or ``full_s`` passed since the last None (a safety net that costs one
full read a minute). A directory that cannot be watched (not created yet, out of watches) is
never reported quiet (``watching`` is False for it), so its reader reads it every time, as before.

Ordering: a watch is added before its directory is read, and ``changes`` drains the queue before
the reads it guards; a write after the drain shows in the next ``changes``. So a reader that
reuses what it read while its key is not in ``changes`` is at most one look behind, like a read
made at the drain.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import time
from collections.abc import Callable, Iterable

log = logging.getLogger("gpuorch.provider.localdir")

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR = 0x4000, 0x8000, 0x01000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name (NUL-padded)
FULL_S = 60.0  # at least this often, everything counts as changed (the safety net above)


def _inotify() -> tuple[Callable[..., int], Callable[..., int], Callable[..., int]] | None:
    """libc's inotify_init1, inotify_add_watch, inotify_rm_watch; None where there are none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
    except (OSError, AttributeError, TypeError):
        return None


class RunDirWatch:
    """Events on watched directories, by key (an instance id). ``names``: the file names whose
    events count (the agent's own files; the daemon's heartbeat and stop files do not).
    ``clock``: monotonic seconds, for ``full_s``. Used by one thread (the pass's)."""

    def __init__(self, names: Iterable[str], full_s: float = FULL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.names = frozenset(n.encode() for n in names)
        self.full_s, self.clock = full_s, clock
        self._by_wd: dict[int, str] = {}
        self._wd: dict[str, int] = {}
        self._changed: set[str] = set()
        self._overflow = True  # the first look reads everything
        self._full_at = 0.0
        self._fd = -1
        self._told = False  # whether a failed watch was logged (once)
        calls = _inotify()
        if calls is not None:
            self._init, self._add, self._rm = calls
            fd = self._init(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
            else:
                log.info("inotify unavailable (%s): agents' files are read every pass", os.strerror(ctypes.get_errno()))

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def watching(self, key: str) -> bool:
        return key in self._wd

    def add(self, key: str, path: str) -> bool:
        """Watch ``path`` (a directory) for ``key``; whether it is watched. Its first ``changes``
        afterwards reports nothing for it: the caller reads it after adding the watch."""
        if key in self._wd:
            return True
        if self._fd < 0:
            return False
        wd = self._add(self._fd, os.fsencode(path), MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR) and not self._told:  # not made yet: tried again next look
                self._told = True  # once: a host out of watches would say it for every directory every pass
                log.info("cannot watch %s (%s): such agents' files are read every pass (fs.inotify.max_user_watches)",
                         path, os.strerror(err))
            return False
        self._by_wd[wd] = key
        self._wd[key] = wd
        return True

    def keep(self, keys: set[str]) -> None:
        """Stop watching every key not in ``keys`` (instances no longer asked about)."""
        if self._wd.keys() <= keys:  # most looks: nothing to drop
            return
        for key in [k for k in self._wd if k not in keys]:
            wd = self._wd.pop(key)
            self._by_wd.pop(wd, None)
            self._rm(self._fd, wd)  # EINVAL if the directory went (IN_IGNORED came): harmless

    def changes(self) -> set[str] | None:
        """The keys with an event on one of ``names`` since the last call, or None: anything may
        have changed (see the module docstring)."""
        if self._fd < 0:
            return None
        self._drain()
        changed, self._changed = self._changed, set()
        now = self.clock()
        if self._overflow or not 0 <= now - self._full_at < self.full_s:
            self._overflow, self._full_at = False, now
            return None
        return changed

    def _drain(self) -> None:
        while True:
            try:
                buf = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            at = 0
            while at + _EVENT.size <= len(buf):
                wd, mask, _, size = _EVENT.unpack_from(buf, at)
                name = buf[at + _EVENT.size:at + _EVENT.size + size].rstrip(b"\0")
                at += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:
                    self._overflow = True
                    continue
                key = self._by_wd.get(wd)
                if key is None:
                    continue
                if mask & IN_IGNORED:  # the directory is gone: watch it again if it comes back
                    self._by_wd.pop(wd, None)
                    if self._wd.get(key) == wd:
                        del self._wd[key]
                    self._changed.add(key)
                elif not name or name in self.names:  # the directory itself, or one of the agent's files
                    self._changed.add(key)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a provider dropped without closing (tests make many): its inotify instance
        self.close()
