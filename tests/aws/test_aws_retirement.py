"""A host retirement EC2 schedules days ahead (moto, the real reconciler, a fake clock): the job
keeps running, ``gpuorch events`` tells of the retirement once, and the job is moved off the
instance (final checkpoint, replacement) only within ``retirement_drain_s`` of the event."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from moto_helpers import announce_reclaim
from reconcile_helpers import Installation, passes

from gpuorch.store.models import AttemptStatus, JobStatus
from gpuorch.testing.e2e import attempts, events

pytestmark = pytest.mark.aws


def test_a_retirement_days_ahead_warns_at_once_and_drains_only_within_the_horizon(moto, session, tmp_path,
                                                                                   clock) -> None:
    a = Installation(tmp_path / "a.db", session, clock, retirement_drain_s=7200)
    job = a.submit(clock)
    passes(clock, a)
    [first] = attempts(a.store, job)
    assert a.job(job).status == JobStatus.RUNNING and first.status == AttemptStatus.RUNNING
    retire_at = (clock.now() + timedelta(days=3)).replace(microsecond=0)
    announce_reclaim(first.region, first.instance_id, retire_at,
                     code="instance-retirement", description="The instance is running on degraded hardware")

    passes(clock, a, n=5)  # days ahead: told once, nothing drained
    assert a.job(job).status == JobStatus.RUNNING
    assert [r.status for r in attempts(a.store, job)] == [AttemptStatus.RUNNING]
    [told] = events(a.store, "scheduled_stop", job)
    assert told.attempt == first.number
    when = f"{retire_at:%Y-%m-%d %H:%M} UTC"
    assert f"scheduled instance-retirement of {first.instance_id} not before {when}" in told.message
    assert "degraded hardware" in told.message
    assert f"moves the job off it from {retire_at - timedelta(hours=2):%Y-%m-%d %H:%M} UTC" in told.message
    assert json.loads(told.data or "{}")["code"] == "instance-retirement"
    assert not events(a.store, "notice", job)

    # A restarted daemon (new reconciler, same database) does not tell it again.
    again = Installation(tmp_path / "a.db", session, clock, retirement_drain_s=7200)
    passes(clock, again, n=2)
    assert len(events(a.store, "scheduled_stop", job)) == 1

    clock.advance((retire_at - timedelta(hours=2) - clock.now()).total_seconds())  # the horizon
    passes(clock, again, n=1)
    first_now = attempts(a.store, job)[0]
    assert first_now.status == AttemptStatus.DRAINING and first_now.drain_until == retire_at
    assert a.job(job).status == JobStatus.RECOVERING and events(a.store, "notice", job)
    passes(clock, again, n=2, step_s=5)
    assert len(attempts(a.store, job)) == 2  # the replacement was requested ahead of the retirement
