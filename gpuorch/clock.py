"""Time as a dependency: the daemon uses the wall clock, tests a FakeClock they advance.

Market time: a simulated provider (the sim) replays its markets ``time_scale`` times faster than
the wall clock. Its policy timers - back-offs, zone avoidance, the no-offer retry, the deadline
policy's re-check and probe holds - are market durations: a 300 s back-off at 120x rests 2.5
wall seconds, not 10 market hours. ``SimulatedMarket`` is how such
a provider says so; ``time_scale`` and ``wall_s`` are what the daemon converts with.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


def utcnow() -> datetime:
    return datetime.now(UTC)


class Clock(Protocol):
    def now(self) -> datetime: ...


@runtime_checkable
class SimulatedMarket(Protocol):
    """A provider whose market runs on its own clock (``SimProvider``)."""

    @property
    def time_scale(self) -> float:
        """Market seconds per wall second (> 0)."""
        ...


def time_scale(provider: object) -> float:
    """Market seconds per wall second of a provider: 1 for a real cloud."""
    scale = provider.time_scale if isinstance(provider, SimulatedMarket) else 1.0
    return float(scale) if scale and scale > 0 else 1.0


def time_scales(providers: Mapping[str, object]) -> tuple[tuple[str, float], ...]:
    """(name, scale) of each provider whose market runs faster than the wall clock (Settings)."""
    return tuple((name, time_scale(p)) for name, p in sorted(providers.items()) if time_scale(p) != 1.0)


def wall_s(market_s: float, scale: float) -> float:
    """Wall seconds of a policy duration stated in market seconds."""
    return market_s / scale if scale > 0 else market_s


def scale_of(scales: tuple[tuple[str, float], ...], provider: str | None = None) -> float:
    """The market clock of ``provider`` among ``scales`` (``Settings.time_scales``: 1 when it is
    not simulated); with no provider, the fastest market there (a timer that waits for any
    provider's market to change, like the no-offer retry)."""
    if provider is None:
        return max((sc for _, sc in scales), default=1.0)
    return dict(scales).get(provider, 1.0)


class SystemClock:
    def now(self) -> datetime:
        return utcnow()


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now


def aware(ts: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every timestamp gpuorch stores is UTC."""
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=UTC)
