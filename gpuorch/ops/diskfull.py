"""A full disk (or quota) in the daemon: one log line per interval, not a traceback per write.

Every job's pass writes to the store and the log mirror; with the disk full each write fails,
and logging each with its traceback (which also needs disk, for journald) floods the log.
``DiskFullLog.report`` says it once per ``every_s`` and counts what it left out.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable

FULL = (errno.ENOSPC, errno.EDQUOT)
FIX = "free space on the file system of the state directory ($GPUORCH_HOME) and the database"


def is_disk_full(e: BaseException) -> bool:
    """An OSError for a full file system or quota, or a database driver saying so (SQLite's
    SQLITE_FULL comes through SQLAlchemy as OperationalError "database or disk is full")."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:  # the driver's error is the cause or context
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in FULL:
            return True
        if "database or disk is full" in str(cur) or "No space left on device" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    return False


class DiskFullLog:
    """Rate-limited reporting of disk-full errors; ``report`` returns False for any other error
    (the caller logs it as before)."""

    def __init__(self, log: logging.Logger, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.every_s, self.clock = log, every_s, clock
        self._last: float | None = None
        self._skipped = 0

    def report(self, e: BaseException, what: str) -> bool:
        if not is_disk_full(e):
            return False
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            self._skipped += 1
            return True
        more = f" ({self._skipped} more failed writes since the last report)" if self._skipped else ""
        self.log.error("disk full: %s failed (%s)%s; %s", what, " ".join(str(e).split())[:200], more, FIX)
        self._last, self._skipped = now, 0
        return True



class OneLineWhenFull(logging.Filter):
    """A log handler's filter: a record that carries a disk-full error, from any logger of the
    process (a pass, the heartbeat, the API, a thread), becomes one line naming the cause and the
    fix, without its traceback (some 50 lines, each needing the disk too), at most once per
    ``every_s`` for the whole process; the lines between are counted in the next one. Other
    records pass unchanged. ``ops.logfmt.configure_logging`` installs it on the daemon's handler."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s, self.clock = every_s, clock
        self._last: float | None = None
        self._skipped = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or not is_disk_full(error):
            return True
        with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last < self.every_s:
                self._skipped += 1
                return False
            more = f"; {self._skipped} more such failures since the last report" if self._skipped else ""
            self._last, self._skipped = now, 0
        cause = " ".join(str(error).split())[:200]
        record.msg = f"disk full: {' '.join(record.getMessage().split())} ({cause}){more}; {FIX}"
        record.args, record.exc_info, record.exc_text, record.stack_info = None, None, None, None
        return True
