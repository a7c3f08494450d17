"""The main night (bench/sweep.py, issue 35): finish first estimates a trial's finish at the price
that trial pays, not at the sweep's spend per step, which is the price of the markets it happened
to run on.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from gpuorch.money.caps import Policy
from gpuorch.provider.port import Offer
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from tests.kit.sweeps import loss, report, submit, trials


def a100(zone: str, spot: float, region: str = "r1") -> Offer:
    return Offer(provider="fake", region=region, zone=zone, instance_type="gpu.a100", gpu="A100-80GB", gpu_count=1,
                 gpu_memory_gib=80, vcpus=8, memory_gib=64, price_per_hour=4.0, spot_price_per_hour=spot,
                 billing_granularity_s=1, min_billing_s=60)


def test_a_second_trial_starts_on_the_cheaper_market_the_leaders_rate_said_it_could_not_afford(store, clock,
                                                                                              tmp_path):
    """bench/sweep.py seed 3: the leader ran where capacity was, at $2.40/h; the sweep's spend per
    step said a second finish cost as much again ($0.40 + 10%) and the second trial waited, with
    the cheaper market ($1.20/h: $0.20) open. Estimated at the price of its next start, it runs
    there and both finish within the cap."""
    fake = FakeProvider(clock, offers=[a100("r1-a", 2.40), a100("r1-b", 1.20)],
                        script=FakeJobScript(duration_s=600, checkpoint_every_s=60, metrics=loss, metrics_every_s=30))
    fake.set_capacity("r1-b", "gpu.a100", True, False)  # the leader gets the dear market
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    sweep = submit(store, clock, tmp_path, max_parallel=2, budget={"max_cost": 0.75},
                   parameters={"LR": [0.003, 0.001]}, objective={"metric": "loss", "mode": "min", "max_step": 600})
    for i in range(300):
        if i == 3:
            fake.set_capacity("r1-b", "gpu.a100", True, True)
        rec.run_pass()
        clock.advance(7)
    first, second = trials(store, sweep.id)
    assert first.status == JobStatus.SUCCEEDED and second.status == JobStatus.SUCCEEDED, second.message
    with store.read() as s:
        zones = {a.job_id: a.zone for a in s.exec(Attempt.__table__.select()) if a.status.value == "ended"}
    assert zones == {first.id: "r1-a", second.id: "r1-b"}
    r = report(store, sweep.id, clock)
    assert r["spent"] <= 0.75 + 1e-9 and r["spend"]["wasted"] == 0


def test_a_fresh_trial_is_priced_at_the_market_placement_ranks_first_and_an_unreadable_spec_prices_nothing():
    """What a trial not running would pay on its next start: the first market placement ranks in
    the pass's catalog (the cheapest here). A spec this version cannot read prices nothing (the
    sweep's spend per step is used), rather than failing every job's gate in the pass."""
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.reconciler.observe.listing import backoff_key, keyed_avoid
    from gpuorch.sweeps.waits import _next_price, _parsed

    spec = _parsed(JobSpec.model_validate({"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"},
                                           "spot_policy": "spot"}).model_dump_json())
    assert spec is not None
    assert _next_price(spec, [a100("r1-a", 2.40), a100("r1-b", 1.20)]) == 1.20
    assert _next_price(spec, []) is None
    # past the back-offs in force: a market that just had no capacity is not where it starts
    offers = [a100("r1-a", 2.40), a100("r1-b", 1.20), a100("r2-a", 1.50, "r2")]
    backed_off = keyed_avoid(frozenset({backoff_key("fake", "r1", "gpu.a100", True)}))
    assert _next_price(spec, offers) == 1.20 and _next_price(spec, offers, backed_off) == 1.50
    assert _parsed('{"resources": {"gpu": 7}}') is None
