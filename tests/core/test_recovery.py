"""Recovery strategies: pure ranking, and the reconciler picking the replacement's market by them.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.placement import Candidate
from gpuorch.policy.recovery import RecoveryContext, get_strategy, strategy_names
from gpuorch.provider.port import Offer
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import AttemptStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider


def offer(region: str, zone: str, spot: float) -> Offer:
    return Offer(provider="fake", region=region, zone=zone, instance_type="gpu.a100", gpu="A100-80GB", gpu_count=1,
                 gpu_memory_gib=80, price_per_hour=4.0, spot_price_per_hour=spot)


# r1-a is cheapest, then r2-a (another region), then r1-b (the preempted zone's neighbour).
OFFERS = [offer("r1", "r1-a", 1.0), offer("r2", "r2-a", 1.1), offer("r1", "r1-b", 1.2), offer("r2", "r2-b", 1.3)]
SPOT = [Candidate(o, True) for o in OFFERS]
RECENT_R1A = frozenset({("fake", "r1-a", True)})  # a spot preemption in r1-a, just now


def zones(ranked: list[Candidate]) -> list[str]:
    return [c.offer.zone for c in ranked]


def test_the_three_strategies_are_registered_and_same_region_first_is_the_default():
    assert {"same-region-first", "next-region-eagerly", "cheapest-first"} <= set(strategy_names())
    assert get_strategy(None).name == "same-region-first"
    with pytest.raises(KeyError, match="known: "):
        get_strategy("teleport")


@pytest.mark.parametrize(("name", "expected"), [
    ("same-region-first", ["r1-b", "r2-a", "r2-b", "r1-a"]),
    ("next-region-eagerly", ["r2-a", "r2-b", "r1-b", "r1-a"]),
    ("cheapest-first", ["r2-a", "r1-b", "r2-b", "r1-a"]),
])
def test_rank_after_a_preemption_in_r1_a(name, expected):
    ctx = RecoveryContext(preempted_region=("fake", "r1"), preempted_spot=True, recent=RECENT_R1A)
    assert zones(get_strategy(name).rank(SPOT, ctx)) == expected


def test_without_a_preemption_every_strategy_is_cheapest_first():
    for name in strategy_names():
        assert zones(get_strategy(name).rank(SPOT, RecoveryContext())) == ["r1-a", "r2-a", "r1-b", "r2-b"]


def test_a_spot_reclaim_does_not_penalise_on_demand_in_that_zone():
    od = Candidate(OFFERS[0], False)
    ctx = RecoveryContext(preempted_region=("fake", "r1"), preempted_spot=True, recent=RECENT_R1A)
    ranked = get_strategy("same-region-first").rank([SPOT[0], od], ctx)
    assert ranked == [od, SPOT[0]]


@pytest.mark.parametrize("name", ["same-region-first", "next-region-eagerly", "cheapest-first"])
def test_a_job_on_spot_stays_on_spot_before_on_demand_even_in_its_region(name):
    od_r1b = Candidate(OFFERS[2], False)  # r1-b on-demand: same region, but 3x the price
    ctx = RecoveryContext(preempted_region=("fake", "r1"), preempted_spot=True, recent=RECENT_R1A)
    ranked = get_strategy(name).rank(sorted([od_r1b, SPOT[1], SPOT[3]], key=lambda c: c.price_per_hour), ctx)
    assert ranked[-1] == od_r1b and {c.offer.zone for c in ranked[:2]} == {"r2-a", "r2-b"}


def test_spec_names_a_registered_strategy_or_fails_naming_the_field():
    assert parse_spec({"name": "a", "run": "x", "recovery": {"strategy": "next-region-eagerly"}}).recovery.strategy \
        == "next-region-eagerly"
    with pytest.raises(UserInputError, match=r"recovery\.strategy: unknown recovery strategy 'nope'; known: "):
        parse_spec({"name": "a", "run": "x", "recovery": {"strategy": "nope"}})


def run_preemption(store, clock, strategy_in_spec: str | None, daemon_strategy: str = "same-region-first"):
    fake = FakeProvider(clock, offers=OFFERS, script=FakeJobScript(duration_s=3000, checkpoint_every_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(recovery_strategy=daemon_strategy))
    spec = {"name": "train", "run": "x", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot"}
    if strategy_in_spec:
        spec["recovery"] = {"strategy": strategy_in_spec}
    job = jobs.submit(store, parse_spec(spec), clock.now())
    for _ in range(10):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        [a1] = jobs.attempts_of(s, job.id)
    assert a1.zone == "r1-a"
    fake.inject_preemption(a1.instance_id, notice_s=120)
    rec.run_pass()  # the notice: drain attempt 1 and request its replacement in the same pass
    with store.read() as s:
        a1, a2 = jobs.attempts_of(s, job.id)
    assert a1.status == AttemptStatus.DRAINING and a2.requested_at == a1.notice_at
    return a2


@pytest.mark.parametrize(("in_spec", "daemon", "zone"), [
    (None, "same-region-first", "r1-b"),
    (None, "next-region-eagerly", "r2-a"),
    ("next-region-eagerly", "same-region-first", "r2-a"),  # the job's choice wins
    ("same-region-first", "next-region-eagerly", "r1-b"),
])
def test_the_replacement_goes_where_the_strategy_says(store, clock, in_spec, daemon, zone):
    assert run_preemption(store, clock, in_spec, daemon).zone == zone


def test_a_replacement_asked_for_after_a_restart_still_waits_for_the_draining_attempt(store, clock, monkeypatch):
    """The pass that recorded the notice died before it asked for the replacement: the next
    daemon's replacement must still wait for the draining attempt's final checkpoint."""
    fake = FakeProvider(clock, offers=OFFERS, script=FakeJobScript(duration_s=3000, checkpoint_every_s=60))
    spec = {"name": "train", "run": "x", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
            "checkpoint": {"store": "file:///tmp/ckpt"}}
    job = jobs.submit(store, parse_spec(spec), clock.now())
    d1 = Reconciler(store, {"fake": fake}, clock=clock, owner="d1", lease_s=1)
    for _ in range(10):
        d1.run_pass()
        clock.advance(5)
    with store.read() as s:
        [a1] = jobs.attempts_of(s, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=120)

    def die(*args):
        raise Crash()

    monkeypatch.setattr(d1.applier.launching, "launch", die)  # SIGKILL after the notice is recorded, before the launch
    with pytest.raises(Crash):
        d1.run_pass()
    clock.advance(2)  # the final checkpoint (5 s after the notice) is not durable yet
    Reconciler(store, {"fake": fake}, clock=clock, owner="d2").run_pass()
    with store.read() as s:
        a1, a2 = jobs.attempts_of(s, job.id)
    assert a1.status == AttemptStatus.DRAINING
    assert (a2.predecessor, a2.status) == (1, AttemptStatus.LAUNCHED)


class Crash(BaseException):
    """Stands in for SIGKILL at one line of the daemon."""
