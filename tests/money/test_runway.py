"""Admission and the running check are one rule (gpuorch.money.caps ``Cap.within``): an attempt
admitted with its runway is never stopped for budget within that runway (the least its
guarantees need: ``caps.runway_s``) unless actual spend moved beyond the projections (here it
cannot: no spot price moves). Property-tested over random prices, billing rules, caps, checkpoint intervals,
finishes and irregular passes, and each attempt's own stop grace (``Policy.for_attempt``: sized by the upload
seen once its first checkpoint is durable); and the cap is never crossed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import EPS, Ledger, Policy, SweepState, gate_for
from gpuorch.money.cost import attempt_cost
from gpuorch.placement import Candidate
from gpuorch.provider.port import Offer
from gpuorch.store.models import Attempt, AttemptStatus, JobStatus

POLICY = Policy(decision_interval_s=30, stop_grace_s=60)
T0 = datetime(2026, 1, 1, tzinfo=UTC)

job_st = st.fixed_dictionaries({
    "price": st.floats(0.3, 6.0),
    "granularity": st.sampled_from([1, 60]),
    "minimum": st.sampled_from([0, 60, 600]),
    "checkpoint": st.sampled_from([None, "30s", "60s", "300s"]),
    "upload": st.sampled_from([None, 0.0, 5.0, 20.0, 100.0]),  # the attempt's checkpoint upload, once seen
    "spot": st.booleans(),
})


def offer(j: dict) -> Offer:
    return Offer(provider="fake", region="r", zone="r-a", instance_type="gpu.x", gpu="A100-80GB", gpu_count=1,
                 gpu_memory_gib=80, vcpus=8, memory_gib=64, price_per_hour=j["price"], spot_price_per_hour=None,
                 billing_granularity_s=j["granularity"], min_billing_s=j["minimum"])


def spec(j: dict):
    doc = {"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"}}
    if j["checkpoint"]:
        doc["checkpoint"] = {"store": "file:///tmp/c", "interval": j["checkpoint"]}
    return parse_spec(doc)


@settings(max_examples=60, deadline=None)
@given(jobs=st.lists(job_st, min_size=2, max_size=6), cap=st.floats(0.02, 1.5),
       steps=st.lists(st.tuples(st.floats(1, 30), st.floats(0, 1)), min_size=10, max_size=60))
def test_no_attempt_is_stopped_for_budget_within_its_runway(jobs, cap, steps):
    specs = [spec(j) for j in jobs]
    cands = [Candidate(offer(j), spot=False) for j in jobs]
    attempts: list[Attempt] = []
    done: set[int] = set()
    now = T0

    def ledger() -> Ledger:  # an upload is seen once the attempt's first checkpoint is durable (its runway)
        uploads = {(a.job_id, a.number): jobs[a.job_id - 1]["upload"] for a in attempts
                   if jobs[a.job_id - 1]["upload"] is not None and a.runway_until is not None and now >= a.runway_until}
        return Ledger.build([(a, 1) for a in attempts], now, POLICY, uploads)

    def gate(jid: int, led: Ledger):
        live = [a for a in attempts if a.job_id == jid and a.status != AttemptStatus.ENDED]
        status = JobStatus.RUNNING if live else JobStatus.QUEUED
        sweep = SweepState(1, "s", cap, None, max_parallel=len(jobs), in_flight=0)
        return gate_for(SimpleNamespace(id=jid, status=status), specs[jid - 1], sweep, led, POLICY)  # type: ignore[arg-type]

    for dt, finish in steps:
        led = ledger()
        for jid in range(1, len(jobs) + 1):  # decided in id order, as the reconciler does
            mine = [a for a in attempts if a.job_id == jid and a.status != AttemptStatus.ENDED]
            for a in mine:
                if a.status == AttemptStatus.DRAINING and now >= a.drain_until:
                    a.status, a.ended_at = AttemptStatus.ENDED, now
                elif a.status == AttemptStatus.RUNNING:
                    g = gate(jid, led)
                    if g.stop is not None:  # drained for its own stop grace, as decide/gates.py does
                        assert now >= a.runway_until, f"job {jid} stopped {a.runway_until - now} early"
                        a.status, a.drain_until = AttemptStatus.DRAINING, now + timedelta(seconds=g.policy.stop_grace_s)
                    elif finish > 0.97:  # the job finishes now
                        a.status, a.ended_at = AttemptStatus.ENDED, now
                        done.add(jid)
                led = ledger()
            if jid in done or any(a.job_id == jid and a.status.live for a in attempts):
                continue
            g, c = gate(jid, led), cands[jid - 1]
            if g.affords(c):
                attempts.append(Attempt(job_id=jid, number=len(attempts) + 1, provider="fake", region="r", zone="r-a",
                                        instance_type="gpu.x", price_per_hour=c.price_per_hour,
                                        billing_granularity_s=c.offer.billing_granularity_s,
                                        min_billing_s=c.offer.min_billing_s, status=AttemptStatus.RUNNING,
                                        spot=jobs[jid - 1]["spot"],
                                        requested_at=now, launched_at=now, runway_until=g.runway_until(c)))
                led = ledger()
        spent = sum(attempt_cost(a, now) for a in attempts)
        assert spent <= cap + EPS, f"spent {spent} over the cap {cap}"
        now += timedelta(seconds=dt)  # the next pass within the decision interval


def test_the_issue_case_is_not_stopped_one_pass_after_its_launch():
    """Per-second billing with a 60 s minimum, admitted with little slack: before, it was
    launched and stopped one pass later (billed the minimum for a second of work)."""
    j = {"price": 10.0, "granularity": 1, "minimum": 60, "checkpoint": "60s"}
    c, s = Candidate(offer(j), spot=False), spec(j)
    sweep = SweepState(1, "s", 0.6, None, max_parallel=3, in_flight=0)
    led = Ledger.build([], T0, POLICY)
    g = gate_for(SimpleNamespace(id=1, status=JobStatus.QUEUED), s, sweep, led, POLICY)  # type: ignore[arg-type]
    assert g.affords(c)  # 10 $/h x (90 s runway: the first checkpoint + 120 s horizon) = $0.583
    a = Attempt(job_id=1, number=1, provider="fake", region="r", zone="r-a", instance_type="gpu.x", price_per_hour=10.0,
                billing_granularity_s=1, min_billing_s=60, status=AttemptStatus.RUNNING, requested_at=T0,
                launched_at=T0, runway_until=g.runway_until(c))
    for t in (1, 30, 60, 89):
        now = T0 + timedelta(seconds=t)
        g = gate_for(SimpleNamespace(id=1, status=JobStatus.RUNNING), s, sweep,  # type: ignore[arg-type]
                     Ledger.build([(a, 1)], now, POLICY), POLICY)
        assert g.stop is None, t
    now = T0 + timedelta(seconds=120)  # past its runway, the cap stops it (and it holds nothing else: for good)
    g = gate_for(SimpleNamespace(id=1, status=JobStatus.RUNNING), s, sweep,  # type: ignore[arg-type]
                 Ledger.build([(a, 1)], now, POLICY), POLICY)
    assert g.stop is not None and g.stop.job_status == JobStatus.BUDGET_EXHAUSTED


def test_an_attempt_stop_grace_is_sized_by_its_uploads():
    """Twice the longest upload seen, at least a pass, at most the configured bound (also the grace
    before any upload was seen)."""
    p = Policy(decision_interval_s=30, stop_grace_s=120)
    assert p.for_attempt(None) == p
    assert p.for_attempt(4.0).stop_grace_s == 30  # a pass at least
    assert p.for_attempt(25.0).stop_grace_s == 50 and p.for_attempt(25.0).horizon_s == 110
    assert p.for_attempt(300.0).stop_grace_s == 120  # never past the bound


def test_the_ledger_reserves_each_attempt_its_own_horizon():
    """Two running attempts at the same price: the one whose upload was seen reserves less (its
    own horizon), and a budget stop drains it for its own grace (the gate's policy)."""
    j = {"price": 3.6, "granularity": 1, "minimum": 0, "checkpoint": None}  # $0.001 a second
    mk = [Attempt(job_id=n, number=1, provider="fake", region="r", zone="r-a", instance_type="gpu.x",
                  price_per_hour=3.6, billing_granularity_s=1, min_billing_s=0, status=AttemptStatus.RUNNING,
                  requested_at=T0, launched_at=T0, runway_until=T0) for n in (1, 2)]
    now = T0 + timedelta(seconds=10)
    led = Ledger.build([(a, 1) for a in mk], now, POLICY, {(2, 1): 5.0})
    assert abs(led.sweeps[1].running[1][0] - 0.120) < 1e-6  # 2 x 30 + 60 s
    assert abs(led.sweeps[1].running[2][0] - 0.090) < 1e-6  # 2 x 30 + 30 s (a pass: twice 5 s is less)
    sweep = SweepState(1, "s", 5.0, None, max_parallel=3, in_flight=2)
    g = gate_for(SimpleNamespace(id=2, status=JobStatus.RUNNING), spec(j), sweep, led, POLICY)  # type: ignore[arg-type]
    assert g.policy.stop_grace_s == 30 and g.stop is None
