"""``gpuorch doctor``'s notifications check: the routes as the daemon would build them (a key
file it cannot read, a URL apprise cannot use), and deliveries that are failing or were dropped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuorch.doctor.context import Context
from gpuorch.doctor.findings import Finding
from gpuorch.errors import UserInputError

NAME = "notifications"


def check_notifications(ctx: Context) -> Iterator[Finding]:
    if ctx.config is None or not ctx.config.notifications.enabled:
        return
    from gpuorch.notify.routes import build_routes

    try:
        routes = build_routes(ctx.config.notifications)
    except UserInputError as e:
        yield Finding.fail(NAME, str(e), "fix the notifications: section (docs/notifications.md); the daemon will "
                           "not start with it")
        return
    yield Finding.ok(NAME, "routes: " + ", ".join(f"{r.name} ({r.shown})" for r in routes))
    health = _health(ctx.config.url)
    if health is None:
        return
    for d in health["dead"]:
        yield Finding.warn(NAME, f"{d['type']} notification {d['uid']} to {d['route']} was dropped after "
                           f"{d['tries']} tries (last: {d['error']})",
                           "check that receiver; `gpuorch events` lists each drop (notification_dead)")
    if health["retrying"]:
        yield Finding.warn(NAME, f"{health['retrying']} deliveries failed at least once and are being retried",
                           "check the receivers; the daemon's log names each failure")


def _health(url: str) -> dict[str, Any] | None:
    from sqlmodel import Session

    from gpuorch.doctor.state import read_only_engine, sqlite_path
    from gpuorch.notify.outbox import health

    path = sqlite_path(url)
    if path is not None and not path.exists():
        return None
    engine = read_only_engine(url)
    try:
        with Session(engine) as s:
            return health(s)
    except Exception:  # an older schema or an unreachable store: the database check says why
        return None
    finally:
        engine.dispose()
