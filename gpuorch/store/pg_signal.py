"""PostgreSQL's change signal for ``Store.data_version``: the server's transaction snapshot.

A transaction that writes gets a transaction id (xid) when it first writes; read-only ones never
get one. ``pg_current_snapshot()`` says ``xmin:xmax:xip``: every xid below ``xmax`` was assigned
by then, and ``xip`` were still in progress. So between two looks, nothing can have been committed
unless an xid was assigned in between (``xmax`` moved) or one in progress then is not now (it
ended). The version counts the looks at which either happened, except for the transactions of
``Store.write_unwatched`` (their xids are noted here, ``note``): the daemon's own heartbeat row,
which no claim reads.

Conservative by construction: a transaction that only started, or that rolled back, also counts,
and xids are cluster-wide, so writes to other databases of the same server count too (a busy
shared server simply makes every claim read, as without a signal). The look is taken before the
claim reads anything: a commit after it shows at the next look. A server older than PostgreSQL 13
(no ``pg_current_snapshot``) gives no signal: every claim reads, as before.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import ProgrammingError

log = logging.getLogger("gpuorch.store")


class SnapshotSignal:
    SNAPSHOT = "SELECT pg_current_snapshot()::text"
    XID = "SELECT pg_current_xact_id()::text"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._last: tuple[int, frozenset[int]] | None = None  # (xmax, xip) of the last look
        self._mine: set[int] = set()  # xids of unwatched transactions not yet known ended
        self._count = 0
        self.available: bool | None = None  # False on a server without the functions (before PostgreSQL 13)

    def version(self) -> int | None:
        if self.available is False:
            return None
        try:
            with self.engine.connect() as conn:
                text = conn.exec_driver_sql(self.SNAPSHOT).scalar_one()
        except ProgrammingError as e:  # undefined function: an older server
            self.available = False
            log.info("no change signal on this PostgreSQL (%s): every claim reads the jobs", str(e).splitlines()[0])
            return None
        self.available = True
        xmin_s, xmax_s, xip_s = text.split(":")
        xmin, xmax = int(xmin_s), int(xmax_s)
        xip = frozenset(int(x) for x in xip_s.split(",") if x)
        with self._lock:
            if self._last is not None and self._changed(*self._last, xmax, xip):
                self._count += 1
            self._last = (xmax, xip)
            self._mine = {x for x in self._mine if x >= xmin}  # below xmin: ended, never seen again
            return self._count

    def _changed(self, last_xmax: int, last_xip: frozenset[int], xmax: int, xip: frozenset[int]) -> bool:
        mine = self._mine
        if xmax - last_xmax > len(mine):  # more xids assigned since than we hold: not all ours
            return True
        return any(x not in mine for x in range(last_xmax, xmax)) or any(x not in mine for x in last_xip - xip)

    def note(self, conn: Connection) -> None:
        """Make ``conn``'s transaction unwatched: its xid assigned now, before it writes (a look
        between the assignment and this note counts it, conservatively)."""
        if self.available is None:
            self.version()  # on a connection of its own: a failed call would abort this transaction
        if not self.available:
            return
        xid = int(conn.exec_driver_sql(self.XID).scalar_one())
        with self._lock:
            self._mine.add(xid)
