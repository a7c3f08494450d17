"""Hold, don't kill: a stop caused by other trials' reservations holds the trial (a clean stop
with a final checkpoint), it resumes from that checkpoint before fresh trials start, and
``budget_exhausted`` is left for money really gone. FakeProvider, real SQLite, fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from datetime import timedelta

from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, default_offers
from tests.kit.sweeps import JOB, report, submit, trials


def test_reservations_hold_the_youngest_trial_and_it_resumes_before_fresh_trials(store, clock, tmp_path):
    # on demand at the spot prices: the three trials start together (a capped sweep starts spot
    # trials one at a time until each has checkpointed, Money._unproven)
    offers = [o.model_copy(update={"price_per_hour": o.spot_price_per_hour}) for o in default_offers()]
    fake = FakeProvider(clock, offers=offers, script=FakeJobScript(duration_s=600, checkpoint_every_s=60,
                                                                   final_checkpoint_s=5))
    fake.scripts["lr-2"] = FakeJobScript(duration_s=1500, checkpoint_every_s=60, final_checkpoint_s=5)
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    # $1.2/h each: near the end of the first two trials, three running trials' reservations (each
    # its own horizon: a 30 s grace once its fast uploads are seen) fill $0.68 while about $0.60 is
    # spent: the youngest is held, not ended. A deadline that needs trials at once (twice the 34 min
    # $0.68 buys on one instance is past it; else they run in turn: sweeps/plain.in_turn)
    sweep = submit(store, clock, tmp_path, max_parallel=3, budget={"max_cost": 0.68}, deadline="1h",
                   parameters={"LR": [0.003, 0.001, 0.0003, 0.1, 0.03]}, job={**JOB, "spot_policy": "on-demand"})
    seen: dict[int, list[JobStatus]] = {}
    for _ in range(400):
        rec.run_pass()
        for t in trials(store, sweep.id):
            seen.setdefault(t.id, []).append(t.status)
        clock.advance(7)
    first, second, third, fourth, fifth = trials(store, sweep.id)
    assert (first.status, second.status) == (JobStatus.SUCCEEDED, JobStatus.SUCCEEDED)
    assert JobStatus.HELD in seen[third.id]  # held ...
    held, resumed = attempts(store, third.id)[:2]
    assert held.reason == TerminationReason.HELD and held.last_checkpoint is not None  # ... cleanly ...
    assert resumed.resumed_from == held.last_checkpoint  # ... and resumed from its final checkpoint
    assert resumed.requested_at < min((a.requested_at for t in (fourth, fifth) for a in attempts(store, t.id)),
                                      default=resumed.requested_at + timedelta(seconds=1))  # before fresh trials
    assert JobStatus.BUDGET_EXHAUSTED not in seen[third.id][:seen[third.id].index(JobStatus.HELD)]
    r = report(store, sweep.id, clock)
    assert 0.68 - 0.1 < r["spent"] <= 0.68 + 1e-9  # the cap is used, and never crossed
    assert fake.live_instances() == []


def test_a_preempted_trial_with_progress_is_not_queued_behind_held_ones():
    """Seeds 3 and 4 of bench/sweep.py: the leader, preempted at step 350-450 and queued for
    capacity, waited for 'held trials resume first' behind a held trial that finish first kept
    waiting: neither ever started. A queued trial with progress goes with the held ones
    (``SweepState.resuming``); held trials finish first keeps waiting are not counted."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from gpuorch.jobs.spec import parse_spec
    from gpuorch.money.caps import Ledger, SweepState, gate_for

    now = datetime(2026, 11, 27, 23, 30, tzinfo=UTC)
    spec = parse_spec({"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"}})
    sweep = SweepState(1, "night", 2.5, None, max_parallel=3, in_flight=0, held=1, resuming=frozenset({1}))
    led, policy = Ledger.build([], now, Policy()), Policy()
    leader = gate_for(SimpleNamespace(id=1, status=JobStatus.QUEUED), spec, sweep, led, policy)  # type: ignore[arg-type]
    fresh = gate_for(SimpleNamespace(id=5, status=JobStatus.QUEUED), spec, sweep, led, policy)  # type: ignore[arg-type]
    assert leader.hold is None
    assert fresh.hold is not None and "held trials" in fresh.hold.message
