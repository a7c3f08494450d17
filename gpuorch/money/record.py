"""The billed interval from the cloud's own record (issue 12, item 6). Pure.

An attempt is billed from the provider's launch time (``Instance.created_at``) to the provider's
stop or termination time (``Instance.ended_at``), wherever the provider reports them; the
daemon's own observation (when it recorded the launch, when it saw the end) stands in only when
the cloud says nothing. So a daemon that was down while an instance was reclaimed bills the
instance's 21.8 s (or its minimum), not the 142.5 s until the daemon looked again.

Each time is held inside what the daemon knows for certain: billing cannot start before the
attempt was requested, nor end before it started, and neither lies in the daemon's future (a
cloud clock ahead of ours is skew: the observation stands until our clock passes it).

- ``billed_start`` / ``billed_end``: the two times, clamped.
- ``corrections``: what to write on an attempt row once the cloud's record is seen (the launch
  time after the first listing, the end time after the termination the daemon asked for).
- ``as_seen``: the row as the ledger should count it in a pass whose listing shows the instance
  already gone (after an outage), before the pass records its end.
"""

from __future__ import annotations

from datetime import datetime

from gpuorch.clock import aware
from gpuorch.provider.port import Instance
from gpuorch.store.models import Attempt, AttemptStatus

TOLERANCE_S = 0.001  # a row within this of the cloud's record is left alone (SQLite keeps microseconds)


def billed_start(requested_at: datetime | None, created_at: datetime | None, now: datetime) -> datetime:
    """When billing starts: the provider's launch time, held within [``requested_at``, ``now``];
    ``now`` (the daemon's observation) when the provider gives none."""
    requested_at, created_at = aware(requested_at), aware(created_at)
    if created_at is None:
        return now
    return min(now, max(created_at, requested_at) if requested_at is not None else created_at)


def billed_end(launched_at: datetime | None, ended_at: datetime | None, now: datetime) -> datetime:
    """When billing stopped: the provider's stop or termination time, held within
    [``launched_at``, ``now``]; ``now`` (when the daemon saw the end) when the provider gives none."""
    launched_at, ended_at = aware(launched_at), aware(ended_at)
    if ended_at is None:
        return now
    return min(now, max(ended_at, launched_at) if launched_at is not None else ended_at)


def reported_end(inst: Instance | None) -> datetime | None:
    """The provider's end time of an instance that is no longer alive (None while alive or unsaid)."""
    return inst.ended_at if inst is not None and not inst.state.alive else None


def _differs(a: datetime | None, b: datetime) -> bool:
    a = aware(a)
    return a is None or abs((a - b).total_seconds()) > TOLERANCE_S


def corrections(row: Attempt, inst: Instance | None, now: datetime) -> dict[str, datetime]:
    """Fields of ``row`` to set from the cloud's record of its instance ``inst`` (as listed this
    pass): ``launched_at`` from ``created_at``, and for an ended row ``ended_at`` from the
    instance's end. An ended row that never recorded its launch (a crash between the launch call
    and its record, the attempt then closed) is billed for the instance the cloud made all the
    same. Empty when the row already agrees, the cloud says nothing, or its time lies in our
    future (skew: looked at again next pass)."""
    if inst is None or (row.launched_at is None and row.status != AttemptStatus.ENDED):
        return {}  # a requested attempt's instance is adopted by decide, not here
    out: dict[str, datetime] = {}
    start = aware(row.launched_at)
    created = aware(inst.created_at)
    if created is not None and created <= now:
        fixed = billed_start(row.requested_at, created, now)
        if _differs(start, fixed):
            out["launched_at"] = start = fixed
    ended = aware(reported_end(inst))
    # An attempt that handed its instance to the warm pool was billed until then: the end is the pool's.
    if row.status == AttemptStatus.ENDED and ended is not None and ended <= now and not row.kept_warm:
        fixed = billed_end(start, ended, now)
        if _differs(row.ended_at, fixed):
            out["ended_at"] = fixed
    return out


def as_seen(row: Attempt, inst: Instance | None, now: datetime) -> Attempt:
    """``row`` as billing should count it now: a live row whose instance the cloud reports ended
    counts as ended then (a copy: the store's row is ended by the pass's decide and apply)."""
    ended = reported_end(inst)
    if row.status == AttemptStatus.ENDED or row.launched_at is None or ended is None:
        return row
    # A fresh, transient row: a copy would share the stored one's SQLAlchemy state.
    return Attempt(**{**row.model_dump(), "status": AttemptStatus.ENDED,
                      "ended_at": billed_end(row.launched_at, ended, now)})
