"""Defects of the reconciler (issue 11), each shown with the FakeProvider, real SQLite and a fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import pytest

from gpuorch.errors import TransientError
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance, LaunchRequest
from gpuorch.reconciler import Reconciler
from gpuorch.runners import keys
from gpuorch.runners.port import Runner, RunnerUnavailable
from gpuorch.store.models import Attempt, AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.e2e import attempts, job_row
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, FakeRunner, default_offers

SPEC = {"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "retry": {"max_preemptions": 3, "max_failures": 0}}


def submit(store, clock, **overrides):
    return jobs.submit(store, parse_spec({**SPEC, **overrides}), clock.now())


class NoRunner(FakeProvider):
    """A provider whose runner is not implemented (or whose runner says it is unavailable)."""

    def __init__(self, clock, error: Exception, where: str) -> None:
        super().__init__(clock)
        self.error, self.where = error, where

    def runner(self, instance: Instance) -> Runner:
        if self.where == "runner":
            raise self.error
        error = self.error

        class Broken(FakeRunner):
            def status(self):  # type: ignore[no-untyped-def]
                raise error

        return Broken(self, instance.id)


@pytest.mark.parametrize(("error", "where"), [
    (NotImplementedError("no runner"), "runner"),
    (NotImplementedError("no status"), "status"),
    (RunnerUnavailable("unreachable"), "status"),
])
def test_a_runner_that_never_answers_still_meets_the_boot_timeout(store, clock, error, where):
    fake = NoRunner(clock, error, where)
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    job = submit(store, clock)
    for _ in range(200):  # 2,000 s of fake time; boot_timeout_s is 900
        rec.run_pass()
        clock.advance(10)
    [first, *_] = attempts(store, job.id)
    assert first.status == AttemptStatus.ENDED and first.reason == TerminationReason.LOST
    assert "not reachable" in first.message
    assert ("terminate", first.instance_id) in fake.calls
    assert fake.get(first.instance_id).state.alive is False


def test_a_finished_jobs_keys_are_deleted(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock, home=tmp_path)
    job = submit(store, clock)
    rec.run_pass()
    keys.ensure_job_key(tmp_path, job.id)  # as the provider's user data does at launch
    keys.ensure_host_key(tmp_path, job.id, 1)
    for _ in range(30):
        rec.run_pass()
        clock.advance(5)
    assert job_row(store, job.id).status == JobStatus.SUCCEEDED
    assert not keys.job_key_dir(tmp_path, job.id).exists()


def test_the_orphan_sweep_removes_keys_without_a_live_attempt(store, clock, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600))
    rec = Reconciler(store, {"fake": fake}, clock=clock, home=tmp_path)
    job = submit(store, clock)
    rec.run_pass()
    keys.ensure_job_key(tmp_path, job.id)
    keys.ensure_job_key(tmp_path, 999)  # a job long gone (a daemon crashed before deleting its keys)
    (tmp_path / keys.KEYS_DIR / "not-a-job").mkdir()
    clock.advance(60)  # the sweep runs once a minute
    rec.run_pass()
    assert keys.job_key_dir(tmp_path, job.id).exists()  # its attempt is live
    assert not keys.job_key_dir(tmp_path, 999).exists()
    assert (tmp_path / keys.KEYS_DIR / "not-a-job").exists()  # not ours to judge


class Recording(FakeProvider):
    def __init__(self, clock) -> None:
        super().__init__(clock)
        self.requests: list[LaunchRequest] = []

    def launch(self, request: LaunchRequest) -> Instance:
        self.requests.append(request)
        return super().launch(request)


def test_a_relaunch_sends_the_full_offer_again(store, clock):
    fake = Recording(clock)
    # No attempt column holds these two: a relaunch must keep them all the same.
    fake._offers = [o.model_copy(update={"interconnect": "nvlink", "interruption_bucket": "<5%"})
                    for o in fake._offers]
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    fake.fail_next("launch", TransientError("throttled"))
    job = submit(store, clock)
    rec.run_pass()
    [a] = attempts(store, job.id)
    assert a.status == AttemptStatus.REQUESTED
    clock.advance(5)
    rec.run_pass()
    first, again = fake.requests
    assert again.client_token == first.client_token
    assert again.offer == first.offer
    assert again.offer.gpu_memory_gib == 80 and again.offer.vcpus == 8 and again.offer.memory_gib == 64
    assert again.offer.spot_price_per_hour == first.offer.spot_price_per_hour != first.offer.price_per_hour
    assert attempts(store, job.id)[0].status == AttemptStatus.LAUNCHED


def test_an_old_attempt_without_a_stored_offer_is_relaunched_from_its_columns(store, clock):
    fake = Recording(clock)
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    fake.fail_next("launch", TransientError("throttled"))
    job = submit(store, clock)
    rec.run_pass()
    with store.write() as s:  # a row written before schema 6
        row = s.get(Attempt, attempts(store, job.id)[0].id)
        row.offer = None
    clock.advance(5)
    rec.run_pass()
    again = fake.requests[-1]
    offer = default_offers()[0]
    assert ((again.offer.zone, again.offer.instance_type, again.offer.gpu)
            == (offer.zone, offer.instance_type, offer.gpu))
    assert attempts(store, job.id)[0].status == AttemptStatus.LAUNCHED
