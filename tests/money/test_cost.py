"""The billing model: increments charged when they begin, at the price then in force."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuorch.money.cost import (
    attempt_cost,
    billed_seconds,
    charged,
    cost_between,
    cost_until,
    current_price,
    projected_cost,
    with_price_change,
)
from gpuorch.store.models import Attempt

T0 = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)


def attempt(price=3.6, g=1, minimum=60, launched=T0, ended=None, **kw) -> Attempt:
    return Attempt(job_id=1, number=1, provider="p", region="r", zone="z", instance_type="t", price_per_hour=price,
                   billing_granularity_s=g, min_billing_s=minimum, launched_at=launched, ended_at=ended, **kw)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize("seconds, g, minimum, billed", [
    (0, 1, 60, 0), (10, 1, 60, 60), (100.2, 1, 60, 101), (1, 3600, 3600, 3600), (3601, 3600, 0, 7200),
    (30, 60, 60, 60), (61, 60, 60, 120), (5, 0, 0, 5),
])
def test_billed_seconds(seconds, g, minimum, billed):
    assert billed_seconds(seconds, g, minimum) == billed


def test_per_second_with_a_minute_minimum():
    a = attempt(price=3.6)  # $0.001 a second
    assert cost_until(a, at(10), now=at(10)) == pytest.approx(0.060)  # the minimum, charged at launch
    assert cost_until(a, at(100), now=at(100)) == pytest.approx(0.100)
    assert attempt_cost(attempt(price=3.6, ended=at(30)), now=at(999)) == pytest.approx(0.060)


def test_hourly_increment_is_charged_when_it_begins():
    a = attempt(price=2.0, g=3600, minimum=0)
    assert cost_until(a, at(1), now=at(1)) == pytest.approx(2.0)
    assert cost_until(a, at(3600), now=at(3600)) == pytest.approx(2.0)
    assert cost_until(a, at(3600.5), now=at(3600.5)) == pytest.approx(4.0)


def test_spot_price_change_applies_to_increments_that_begin_after_it():
    a = attempt(price=3.6, g=60, minimum=60)
    a.price_changes = with_price_change(a, at(90), 7.2)
    assert current_price(a) == 7.2
    # increments begin at 0 (launch price), 60 (3.6: before the change), 120 and 180 (7.2)
    assert cost_until(a, at(200), now=at(200)) == pytest.approx((60 * 3.6 + 60 * 3.6 + 120 * 7.2) / 3600)
    a.price_changes = with_price_change(a, at(150), 1.8)
    assert cost_until(a, at(200), now=at(200)) == pytest.approx((60 * 3.6 + 60 * 3.6 + 60 * 7.2 + 60 * 1.8) / 3600)


def test_cost_so_far_never_decreases_even_when_the_price_drops_inside_the_minimum():
    a = attempt(price=3.6, g=1, minimum=60)
    a.price_changes = with_price_change(a, at(20), 0.36)
    costs = [cost_until(a, at(s / 2), now=at(600)) for s in range(0, 400)]
    assert costs == sorted(costs)


def test_closed_form_matches_summing_each_second():
    changes = [(37.0, 5.0), (500.5, 0.7), (901.0, 9.9)]

    def price_at(k):
        return [p for off, p in [(0, 1.3)] + changes if off <= k][-1]

    slow = sum(1.3 if k < 60 else price_at(k) for k in range(1234))  # 1234 one-second increments
    assert charged(1.3, 1, 60, 1233.4, changes) == pytest.approx(slow / 3600)


def test_costs_split_by_day_add_up():
    a = attempt(price=3.6, g=1, minimum=60, ended=at(7200))  # 23:00 to 01:00
    midnight = datetime(2026, 3, 2, tzinfo=UTC)
    first, second = cost_between(a, None, midnight, at(9999)), cost_between(a, midnight, at(9999), at(9999))
    assert (first, second) == (pytest.approx(3.6), pytest.approx(3.6))
    assert first + second == pytest.approx(attempt_cost(a, at(9999)))


def test_projection():
    a = attempt(price=3.6, g=1, minimum=60)
    assert projected_cost(a, at(130), now=at(100)) == pytest.approx(0.130)
    queued = attempt(price=3.6, launched=None)
    assert projected_cost(queued, at(30), now=at(0)) == pytest.approx(0.060)  # as if launched now
    assert attempt_cost(queued, at(1000)) == 0
