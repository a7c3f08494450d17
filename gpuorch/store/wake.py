"""The store's change signal: a submit wakes a sleeping daemon at once (issue 18).

Between passes the daemon sleeps until its next pass is due (at most ``poll_s``); a job
submitted meanwhile would wait that long for its launch. ``notify`` tells every daemon sleeping
on the same store to run a pass now; ``Listener`` is what a daemon sleeps on (its ``fileno`` goes
into the daemon's ``select``):

- PostgreSQL: ``NOTIFY gpuorch_wake``, and ``LISTEN`` on a connection of the daemon's own. Every
  daemon of an HA pair wakes; their claims decide which one takes the job.
- SQLite: a FIFO beside the database file (``<database>.wake``, mode 0600), made by the daemon.
  ``notify`` writes one byte without blocking; with no daemon reading it, or a byte already
  pending (the pipe is full), there is nothing to do. An in-memory database has no signal.

A lost signal costs at most the wait until the next due pass: the daemon's poll stays the upper
bound. So ``notify`` never raises and never blocks, and a ``Listener`` that breaks stops waking
(``drain`` returns False; the daemon opens a new one later).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuorch.store.db import Store

log = logging.getLogger("gpuorch.store")

CHANNEL = "gpuorch_wake"


def fifo_path(url: str) -> Path | None:
    """The SQLite store's wake-up FIFO (None: not a plain SQLite file, or not SQLite)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1]
    if not path or path == ":memory:" or "?" in path:
        return None
    return Path(path + ".wake")


def notify(store: Store) -> None:
    """Wake the daemons sleeping on ``store`` (none may be: then nothing happens). Never raises."""
    try:
        if store.url.startswith("postgresql"):
            from sqlalchemy import text

            with store._write.connect() as conn:
                conn.execute(text(f"NOTIFY {CHANNEL}"))
                conn.commit()
            return
        path = fifo_path(store.url)
        if path is None or not stat.S_ISFIFO(os.lstat(path).st_mode):  # never write into a file
            return
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENXIO, errno.EAGAIN):  # no FIFO, no reader, one pending
            log.debug("wake-up not sent: %s", e)
    except Exception as e:  # a database hiccup: the daemon's poll finds the job anyway
        log.debug("wake-up not sent: %s", e)


class Listener:
    """A daemon's end of the signal. ``fileno`` is readable once woken; ``drain`` consumes the
    pending wake-ups (False if the listener broke and should be replaced)."""

    def __init__(self, fd: int, drain: object, close: object) -> None:
        self._fd, self._drain, self._close = fd, drain, close

    def fileno(self) -> int:
        return self._fd

    def drain(self) -> bool:
        try:
            self._drain()  # type: ignore[operator]
            return True
        except Exception as e:
            log.warning("the store's wake-up signal broke (%s); polling until it is back", e)
            return False

    def close(self) -> None:
        try:
            self._close()  # type: ignore[operator]
        except Exception:
            pass


def listen(store: Store) -> Listener | None:
    """A listener on ``store``'s signal, or None where there is none (an in-memory SQLite
    database, a FIFO path taken by something else, a PostgreSQL server refusing the connection)."""
    try:
        if store.url.startswith("postgresql"):
            return _listen_postgres(store.url)
        path = fifo_path(store.url)
        return None if path is None else _listen_fifo(path)
    except Exception as e:
        log.warning("no wake-up signal on this store (%s): submitted jobs wait for the next poll", e)
        return None


def _listen_fifo(path: Path) -> Listener | None:
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        pass
    if not stat.S_ISFIFO(os.lstat(path).st_mode):
        log.warning("%s is not a FIFO: no wake-up signal; submitted jobs wait for the next poll", path)
        return None
    r = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # held open: the reader never sees end of file

    def drain() -> None:
        try:
            while os.read(r, 512):
                pass
        except BlockingIOError:
            pass

    def close() -> None:
        os.close(r)
        os.close(w)

    return Listener(r, drain, close)


def _listen_postgres(url: str) -> Listener:
    import psycopg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    conn.execute(f"LISTEN {CHANNEL}")

    def drain() -> None:
        for _ in conn.notifies(timeout=0):  # what has arrived; returns at once
            pass

    return Listener(conn.fileno(), drain, conn.close)
