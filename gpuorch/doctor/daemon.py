"""Doctor check: is a daemon running on this store? Read from the daemons' heartbeats
(``gpuorch.store.heartbeat``) over a read-only connection, like the database check."""

from __future__ import annotations

from collections.abc import Iterator

from gpuorch.doctor.context import Context
from gpuorch.doctor.findings import Finding


def check_daemon(ctx: Context) -> Iterator[Finding]:
    from sqlalchemy import inspect
    from sqlmodel import Session, col, func, select

    from gpuorch.clock import utcnow
    from gpuorch.doctor.state import read_only_engine, sqlite_path
    from gpuorch.store.heartbeat import HOW_TO_START, load_state
    from gpuorch.store.models import Job

    if ctx.config is None:
        return
    path = sqlite_path(ctx.config.url)
    if path is not None and not path.exists():
        return  # the database check says so already
    now = utcnow()
    engine = read_only_engine(ctx.config.url)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("heartbeat"):
                return  # a schema older than this gpuorch: the database check says so
        with Session(engine) as s:
            state = load_state(s, now)
            waiting = s.exec(select(func.count()).select_from(Job).where(col(Job.finished_at).is_(None))).one()
    finally:
        engine.dispose()
    alive = [d for d in state["daemons"] if d["alive"]]
    if alive:
        names = ", ".join(f"{d['owner']} ({d['jobs_held']} jobs held)" for d in alive)
        outcome = state["last_outcome"]
        if outcome not in (None, "ok"):  # None: started, no pass finished yet
            yield Finding.warn("daemon", f"running ({names}), but its last pass {outcome}",
                               "read the daemon's log: journalctl -u gpuorch (or its stderr)")
        else:
            when = f"last pass {state['age_s']:.0f}s ago" if state["age_s"] is not None else "no pass finished yet"
            yield Finding.ok("daemon", f"running: {names}; {when}")
        return
    if state["stopped_at"] is not None:
        last = f"the last one stopped at {state['stopped_at']:%Y-%m-%d %H:%M:%S} UTC"
    elif state["age_s"] is not None:
        last = f"the last pass was {state['age_s']:.0f}s ago"
    else:
        last = "no daemon has ever run on this store"
    yield Finding.warn("daemon", f"no daemon is running ({last}); {waiting} unfinished job(s) wait for one",
                       HOW_TO_START.replace("start one with", "start it with"))
