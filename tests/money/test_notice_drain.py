"""A capped job's preemption notice is drained for the attempt's own stop grace, not to a later
cloud deadline (gpuorch.reconciler.decide.gates ``notice_drain``): the attempt's horizon then covers
any notice (gpuorch.money.caps module docstring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuorch.reconciler.decide.actions import Drain, Progress, Step
from gpuorch.reconciler.decide.gates import notice_drain

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_long_notice_is_drained_for_the_attempt_grace_only():
    drain = Drain(1, notice_at=T0, until=T0 + timedelta(seconds=120))  # AWS's 120 s
    step = Step((Progress(1, None), drain), requeue_after=5.0)  # type: ignore[arg-type]
    now = T0 + timedelta(seconds=10)  # the look that saw it
    short_step, short = notice_drain(step, drain, now, grace_s=30.0)
    assert short.until == now + timedelta(seconds=30) and short.notice_at == T0
    assert short_step.actions == (step.actions[0], short) and short_step.requeue_after == 5.0


def test_a_notice_shorter_than_the_grace_keeps_the_cloud_deadline():
    drain = Drain(1, notice_at=T0, until=T0 + timedelta(seconds=30))
    step = Step((drain,))
    assert notice_drain(step, drain, T0, grace_s=120.0) == (step, drain)
