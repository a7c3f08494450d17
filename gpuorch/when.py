"""Points in time users write: ``2026-11-28``, ``2026-11-28T08:00`` (UTC unless an offset is
given), or a duration like ``8h`` / ``7d`` counted from now (forward for deadlines, back for
``--since``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuorch.units import parse_duration_s


def parse_instant(text: str | datetime, now: datetime, *, ago: bool = False) -> datetime:
    """An aware UTC datetime; a duration is ``now`` plus it (minus it with ``ago``). ValueError."""
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    raw = str(text).strip()
    try:
        seconds = parse_duration_s(raw)
    except ValueError:
        pass
    else:
        if raw and raw[-1].isalpha():  # a bare number is not a duration here: too easy to misread
            try:
                return now + timedelta(seconds=-seconds if ago else seconds)
            except (OverflowError, ValueError):  # past year 9999 (or before year 1)
                raise ValueError(f"{raw!r} is further than a calendar reaches; give a shorter duration") from None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"cannot read {raw!r}; write a time like 2026-11-28 or 2026-11-28T08:00, "
                         f"or a duration like {'24h or 7d' if ago else '8h'}") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
