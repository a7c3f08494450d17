"""Sim time everywhere (issue 12, item 7), the timers left on wall time before: on a provider
whose market runs ``time_scale`` times faster than the wall clock, the no-offer retry and the
deadline policy's re-check and probe holds rest their market length. The real reconciler, a
real SQLite store and a fake clock; the provider is the FakeProvider saying it is simulated.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from sqlmodel import select

from gpuorch.clock import scale_of, time_scale
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.decide.deadline import PROBE_MAX_S
from gpuorch.reconciler.observe.views import Settings
from gpuorch.store.models import Attempt, Job, JobStatus, TerminationReason
from gpuorch.testing.e2e import job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SCALE = 120.0  # market seconds per wall second


class Simulated(FakeProvider):
    """The FakeProvider on a market clock SCALE times the wall's (gpuorch.clock.SimulatedMarket)."""

    @property
    def time_scale(self) -> float:
        return SCALE


def _until(store, job_id, clock) -> float:
    j = job_row(store, job_id)
    assert j.not_before is not None, j.message
    return (j.not_before.replace(tzinfo=clock.now().tzinfo) - clock.now()).total_seconds()


def _no_offer(rec, store, job_id, clock) -> None:
    """Run passes until the job's "no offer fits" is written."""
    for _ in range(20):  # launches find no capacity, the offers are backed off: nothing left to try
        rec.run_pass()
        if "no offer fits" in (job_row(store, job_id).message or ""):
            return
        clock.advance(1e-3)
    raise AssertionError(job_row(store, job_id).message)


def test_scales_per_provider_and_the_fastest():
    assert time_scale(Simulated()) == SCALE
    scales = (("sim", SCALE), ("sim2", 60.0))
    assert (scale_of(scales, "sim"), scale_of(scales, "aws")) == (SCALE, 1.0)  # a real cloud: wall time
    assert (scale_of(scales), scale_of(())) == (SCALE, 1.0)  # the fastest; none simulated


def test_the_no_offer_retry_rests_its_market_length(store, clock):
    """No offer fits (every one has no capacity and the class is backed off): 30 s of market time
    is 0.25 wall s on the simulated market, 30 s on a real cloud: the retry a job under a budget
    writes as its ``not_before``. A job no gate applies to waits for an input of its "no offer" to
    change instead (memo.py ``WaitingJobs``): no ``not_before``."""
    for fake, want in ((Simulated(clock), 30 / SCALE), (FakeProvider(clock), 30.0)):
        for o in fake._offers:
            for spot in (True, False):
                fake.set_capacity(o.zone, o.instance_type, spot, False)
        rec = Reconciler(store, {fake.name: fake}, clock=clock, settings=Settings(no_offer_retry_s=30.0),
                         backoff_s=3600)
        job = jobs.submit(store, parse_spec({"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"}}),
                          clock.now())
        _no_offer(rec, store, job.id, clock)
        assert job_row(store, job.id).not_before is None
        capped = jobs.submit(store, parse_spec({"name": "c", "run": "true", "resources": {"gpu": "A100:80GB:1"},
                                                "budget": {"max_cost": 100}}), clock.now())
        _no_offer(rec, store, capped.id, clock)
        assert abs(_until(store, capped.id, clock) - want) < 1e-6  # written by this pass
        with store.write() as s:
            for i in (job.id, capped.id):
                s.get(Job, i).status = JobStatus.CANCELLED


def _deadline_job(store, clock):
    spec = parse_spec({"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
                       "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"},
                       "deadline": {"at": "12h", "job_hours": 2, "startup": "5m"}})
    return jobs.submit(store, spec, clock.now())


def test_the_deadline_policy_rechecks_and_probes_on_the_market_clock(store, clock):
    """A deadline job waiting for spot that no market has: the policy's one-minute re-check is
    0.5 wall s at 120x, and its probes of each market come further apart up to PROBE_MAX_S of
    market time (15 wall s), not of wall time (30 min)."""
    fake = Simulated(clock, script=FakeJobScript(duration_s=7200, checkpoint_every_s=600))
    for o in fake._offers:
        fake.set_capacity(o.zone, o.instance_type, True, False)
    rec = Reconciler(store, {fake.name: fake}, clock=clock, backoff_s=300)  # 2.5 wall s at 120x
    job = _deadline_job(store, clock)
    rechecks = []
    for _ in range(400):  # 400 wall s: 13 market hours
        rec.run_pass()
        j = job_row(store, job.id)
        if (j.message or "").startswith("deadline policy: waits for spot") and j.not_before is not None:
            rechecks.append(_until(store, job.id, clock))
        clock.advance(1.0)
    assert rechecks and max(rechecks) <= 60 / SCALE + 1e-6  # the re-check: a market minute
    with store.read() as s:
        probes = list(s.exec(select(Attempt).where(Attempt.job_id == job.id,
                                                   Attempt.reason == TerminationReason.NO_CAPACITY)))
    rounds = sorted({a.requested_at for a in probes})
    gaps = [(b - a).total_seconds() for a, b in zip(rounds, rounds[1:], strict=False)]
    cap = PROBE_MAX_S / SCALE  # 15 wall s
    assert len(gaps) > 10 and max(gaps) <= cap + 2.5 + 2  # capped at its market length (+ back-off, passes)
    assert max(gaps) >= cap  # it did grow to the cap: probes rarer and rarer, as on a real cloud
