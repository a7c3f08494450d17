"""Sim time everywhere (issue 12, item 7): on a simulated market the daemon's policy timers are
market durations. At 120x, a 300 s back-off rests 2.5 wall seconds (300 market seconds), not 10
market hours; a preempted zone is avoided for ``avoid_preempted_zone_s`` of market time.

Bare Reconciler: the market's time scale and the FakeProvider are set by the test to measure the
policy timers in market time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sim_data import write_trace
from sqlmodel import select

from gpuorch.clock import time_scale, time_scales, wall_s
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.decide.job import recovery_context
from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Backoff, Job, TerminationReason
from gpuorch.testing.fake_provider import FakeProvider

SCALE = 120.0


def test_only_a_simulated_market_has_a_time_scale(make_sim, tmp_path):
    sim = make_sim(traces=[f"us-east-1a={write_trace(tmp_path / 'a.json', [1] * 10)}"], time_scale=SCALE)
    fake = FakeProvider()
    assert (time_scale(sim), time_scale(fake), time_scale(None)) == (SCALE, 1.0, 1.0)
    assert time_scales({"sim": sim, "fake": fake}) == (("sim", SCALE),)
    assert wall_s(300, SCALE) == 2.5 and wall_s(300, 1.0) == 300


def test_a_back_off_on_the_sim_lasts_its_market_length(make_sim, store, tmp_path):
    zero = write_trace(tmp_path / "us-east-1a_v100_1.json", [0] * 100)  # no spot capacity, ever
    sim = make_sim(traces=[f"us-east-1a={zero}"], time_scale=SCALE, agents="external")
    rec = Reconciler(store, {"sim": sim}, backoff_s=300.0, launch_wait_s=60.0)  # the pass waits for its launch
    job = jobs.submit(store, parse_spec({"name": "t", "run": "true", "resources": {"gpu": "V100"},
                                         "spot_policy": "spot"}), datetime.now(UTC))
    rec.run_pass()
    with store.read() as s:
        [a] = s.exec(select(Attempt).where(Attempt.job_id == job.id)).all()
        [b] = s.exec(select(Backoff)).all()
    assert (a.status, a.reason) == (AttemptStatus.ENDED, TerminationReason.NO_CAPACITY)
    start, until = a.ended_at.replace(tzinfo=UTC), b.until.replace(tzinfo=UTC)
    assert (until - start).total_seconds() == 2.5  # wall seconds
    assert sim.sim_time(until.timestamp()) - sim.sim_time(start.timestamp()) == 300.0  # market seconds


def _preempted(provider: str, ended: datetime) -> AttemptView:
    row = Attempt(job_id=1, number=1, provider=provider, region="us-east-1", zone="us-east-1a", instance_type="p3",
                  spot=True, status=AttemptStatus.ENDED, reason=TerminationReason.PREEMPTED, ended_at=ended)
    return AttemptView(row, observed=True)


def test_a_preempted_zone_is_avoided_for_its_market_length():
    now = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    settings = Settings(avoid_preempted_zone_s=3600, time_scales=(("sim", SCALE),))  # 30 wall seconds at 120x
    spec = parse_spec({"name": "t", "run": "true", "resources": {"gpu": "V100"}})

    def recent(provider: str, ago_s: float) -> bool:
        view = JobView(Job(id=1, name="t", spec=spec.model_dump_json()), spec,
                       [_preempted(provider, now - timedelta(seconds=ago_s))])
        return bool(recovery_context(view, now, settings, None).recent)

    assert recent("sim", 29) and not recent("sim", 31)  # 58 and 62 market minutes ago
    assert recent("aws", 31) and recent("aws", 3599) and not recent("aws", 3601)  # a real cloud: wall time
