"""EC2 responses -> the port's models. Pure functions (no boto3, no I/O), unit-tested alone.

Preemption, as EC2 shows it:

- after the fact: a spot instance reclaimed by EC2 reads ``shutting-down``/``terminated`` with
  state reason ``Server.SpotInstanceTermination`` (``Server.SpotInstanceShutdown`` for a stop,
  ``Server.ScheduledStop`` for a retirement): PREEMPTED, unlike a termination we asked for.
- ahead of time: the spot request of an instance being reclaimed moves to
  ``marked-for-termination`` when the two-minute notice goes out (deadline: that status's
  update time + 120 s); scheduled events ``instance-stop``/``instance-retirement`` in
  ``DescribeInstanceStatus`` announce a stop at ``NotBefore``, often days ahead. Such a stop is a
  ``scheduled_stop`` at once, but the preemption deadline (which drains the job) only within
  ``retirement_drain_s`` of ``NotBefore``: draining at once would give up days of a healthy
  instance. The agent on the instance sees the spot notice earlier, through instance metadata
  (``spot/instance-action``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuorch.provider.port import Instance, InstanceState, ScheduledStop, Volume

from .requests import tags_of

PROVIDER = "aws"
PREEMPTED_REASONS = frozenset({"Server.SpotInstanceTermination", "Server.SpotInstanceShutdown", "Server.ScheduledStop"})
RECLAIM_EVENTS = frozenset({"instance-stop", "instance-retirement"})  # reboots and maintenance leave it running
SPOT_NOTICE_CODES = frozenset({"marked-for-termination", "marked-for-stop", "marked-for-hibernation"})
SPOT_NOTICE_S = 120.0
_STATES = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "shutting-down": InstanceState.STOPPING,
    "stopped": InstanceState.TERMINATED,  # our instances never stop on purpose; a stopped one is done
    "terminated": InstanceState.TERMINATED,
}


def utc(ts: datetime | None) -> datetime | None:
    return ts.astimezone(UTC) if ts is not None else None


# EC2 dates its most recent state transition in ``StateTransitionReason``: "User initiated
# (2026-11-28 08:48:26 GMT)" for a stop or termination through the API (moto writes "UTC").
_TRANSITION_AT = re.compile(r"\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")


def transition_time(reason: str | None) -> datetime | None:
    """The time in an instance's ``StateTransitionReason``, if it carries one (to the second)."""
    m = _TRANSITION_AT.search(reason or "")
    if m is None:
        return None
    try:
        return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def instance_state(ec2_state: str, reason_code: str | None) -> InstanceState:
    """EC2 state name (+ state reason code) -> InstanceState; a reclaimed instance is PREEMPTED."""
    state = _STATES.get(ec2_state)
    if state is None:
        raise ValueError(f"unknown EC2 instance state {ec2_state!r}")
    if not state.alive and reason_code in PREEMPTED_REASONS:
        return InstanceState.PREEMPTED
    return state


def scheduled_stop(events: Iterable[Mapping[str, Any]], drain_s: float) -> ScheduledStop | None:
    """The earliest pending stop among an instance's scheduled events (``DescribeInstanceStatus``
    ``Events``), reboots and maintenance aside; completed or cancelled events do not count.
    ``notice_at``: ``drain_s`` before its ``NotBefore``."""
    pending = [
        e for e in events
        if e.get("Code") in RECLAIM_EVENTS and e.get("NotBefore") is not None
        and not str(e.get("Description", "")).startswith(("[Completed]", "[Canceled]"))
    ]  # fmt: skip
    if not pending:
        return None
    first = min(pending, key=lambda e: utc(e["NotBefore"]))  # type: ignore[arg-type, return-value]
    at = utc(first["NotBefore"])
    assert at is not None
    return ScheduledStop(at=at, kind=str(first["Code"]), description=str(first.get("Description") or ""),
                         notice_at=at - timedelta(seconds=drain_s))


def reclaim_deadline(stop: ScheduledStop | None, now: datetime) -> datetime | None:
    """The preemption deadline a scheduled stop sets at ``now``: its time, once ``now`` has
    reached its ``notice_at``; None before (and without a stop)."""
    if stop is None or (stop.notice_at is not None and now < stop.notice_at):
        return None
    return stop.at


def spot_notice_deadline(status: Mapping[str, Any] | None) -> datetime | None:
    """Deadline of a spot interruption notice from a spot request's ``Status``, if it has one."""
    marked = utc(status.get("UpdateTime")) if status and status.get("Code") in SPOT_NOTICE_CODES else None
    return marked + timedelta(seconds=SPOT_NOTICE_S) if marked is not None else None


def spot_end(status: Mapping[str, Any] | None) -> datetime | None:
    """When EC2 ended a spot instance, from its request's ``Status`` once it reads
    ``instance-terminated-*`` / ``instance-stopped-*`` (the status's update time)."""
    code = str((status or {}).get("Code") or "")
    ended = code.startswith(("instance-terminated-", "instance-stopped-"))
    return utc(status.get("UpdateTime")) if ended and status else None


def earliest(*deadlines: datetime | None) -> datetime | None:
    return min((d for d in deadlines if d is not None), default=None)


def to_instance(d: Mapping[str, Any], region: str, deadline: datetime | None = None,
                tags: Mapping[str, str] | None = None, stop: ScheduledStop | None = None,
                ended: datetime | None = None) -> Instance:
    """One ``DescribeInstances``/``RunInstances`` instance. ``tags`` fill in for a response that
    carries none (RunInstances' does not always); ``ended``, for one no longer running whose
    ``StateTransitionReason`` carries no time (a spot reclaim: its request's status time)."""
    reason = (d.get("StateReason") or {}).get("Code") or None
    state = instance_state(d["State"]["Name"], reason)
    host = d.get("PublicIpAddress") or d.get("PrivateIpAddress")
    zone = (d.get("Placement") or {}).get("AvailabilityZone", "")
    return Instance(
        id=d["InstanceId"], provider=PROVIDER, region=region, zone=zone,
        instance_type=d["InstanceType"], spot=d.get("InstanceLifecycle") == "spot", state=state,
        tags=tags_of(d) or dict(tags or {}), created_at=utc(d.get("LaunchTime")), host=host, port=22 if host else None,
        state_reason=reason, preemption_deadline=deadline if state.alive else None,
        scheduled_stop=stop if state.alive else None,
        # Billing ends at the transition out of running; EC2 reports no time for some reasons
        # (then the daemon's observation stands: gpuorch.money.record).
        ended_at=None if state.alive else transition_time(d.get("StateTransitionReason")) or ended,
    )


def to_volume(d: Mapping[str, Any], region: str) -> Volume:
    attached = [a["InstanceId"] for a in d.get("Attachments") or () if a.get("State") in ("attaching", "attached")]
    return Volume(id=d["VolumeId"], provider=PROVIDER, region=region, zone=d["AvailabilityZone"],
                  size_gib=float(d["Size"]), attached_to=attached[0] if attached else None, tags=tags_of(d))
