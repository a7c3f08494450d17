"""A hung cloud call holds only its own job: another job's preemption notice is handled in the
same pass while a launch blocks (a real blocking fake provider; the reconciler never sleeps).

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance, LaunchRequest, client_token
from gpuorch.reconciler import Reconciler
from gpuorch.runners.port import Runner
from gpuorch.store.models import AttemptStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}}


class HangingLaunch(FakeProvider):
    """Launches for ``hang_job`` block until ``release`` is set (at most 120 s), as a GCP or Azure
    launch waiting on its operation may."""

    def __init__(self, clock) -> None:
        super().__init__(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=60))
        self.hang_job: int | None = None
        self.release, self.entered = threading.Event(), threading.Event()

    def launch(self, request: LaunchRequest) -> Instance:
        if request.job_id == self.hang_job:
            self.entered.set()
            self.release.wait(120)
        return super().launch(request)


def test_a_notice_is_handled_within_one_pass_while_another_jobs_launch_hangs(store, clock):
    fake = HangingLaunch(clock)
    rec = Reconciler(store, {"fake": fake}, clock=clock, launch_wait_s=0.2)
    running = jobs.submit(store, parse_spec({**SPEC, "name": "running"}), clock.now())
    for _ in range(5):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        [a1] = jobs.attempts_of(s, running.id)
    assert a1.status == AttemptStatus.RUNNING
    hung = jobs.submit(store, parse_spec({**SPEC, "name": "hung"}), clock.now())
    fake.hang_job = hung.id
    try:
        rec.run_pass()  # the hung job's launch starts and does not return
        assert fake.entered.is_set()
        fake.inject_preemption(a1.instance_id, notice_s=30)
        clock.advance(2)
        started = time.monotonic()
        rec.run_pass()  # the next pass: the other job's notice, while the launch still hangs
        took = time.monotonic() - started
        with store.read() as s:
            a1, a2 = jobs.attempts_of(s, running.id)
            [h] = jobs.attempts_of(s, hung.id)
        assert took < 30  # not the launch's 120 s
        assert a1.status == AttemptStatus.DRAINING and a2.status == AttemptStatus.LAUNCHED  # replacement asked for
        assert h.status == AttemptStatus.REQUESTED  # intent recorded; its launch is still out
    finally:
        fake.release.set()
    deadline = time.monotonic() + 30
    while rec.pool.busy(hung.id) and time.monotonic() < deadline:  # the test waits, not the reconciler
        time.sleep(0.01)
    clock.advance(2)
    rec.run_pass()  # the launch is over: the next pass sees the instance it recorded
    with store.read() as s:
        [h] = jobs.attempts_of(s, hung.id)
        assert h.status in (AttemptStatus.LAUNCHED, AttemptStatus.RUNNING) and h.instance_id is not None
    token = client_token(hung.id, 1, store.installation_id)
    assert fake.calls.count(("launch", token)) == 1  # no second launch while the first was out


def test_the_launches_of_one_pass_share_one_wait():
    """Three hung launches in one pass hold it for one ``wait_s``, not three; each still runs."""
    from gpuorch.reconciler.apply.launch_pool import LaunchPool

    pool = LaunchPool(workers=4, wait_s=1.0)
    release, entered = threading.Event(), []
    try:
        pool.new_pass()
        started = time.monotonic()
        finished = [pool.run(job, lambda job=job: (entered.append(job), release.wait(30))) for job in (1, 2, 3)]
        took = time.monotonic() - started
        assert finished == [False, False, False] and all(pool.busy(j) for j in (1, 2, 3))
        assert took < 2.0  # one shared second (each waiting its own would take three)
    finally:
        release.set()
        pool.close()
    assert sorted(entered) == [1, 2, 3]


class HangingStatus(FakeProvider):
    """The agent status of ``hang_instance`` blocks until ``release`` is set (at most 120 s), as an
    SSH read from a hung host waits out its connection retries and I/O timeout."""

    capabilities = dataclasses.replace(FakeProvider.capabilities, runners_may_block=True)  # as an SSH runner's

    def __init__(self, clock) -> None:
        super().__init__(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=60))
        self.hang_instance: str | None = None
        self.release, self.entered = threading.Event(), threading.Event()

    def runner(self, instance: Instance) -> Runner:
        runner = super().runner(instance)
        if instance.id != self.hang_instance:
            return runner
        plain = runner.status

        def status():  # type: ignore[no-untyped-def]
            self.entered.set()
            self.release.wait(120)
            return plain()

        runner.status = status  # type: ignore[method-assign]
        return runner


def test_a_notice_is_handled_within_one_pass_while_another_jobs_status_read_hangs(store, clock):
    fake = HangingStatus(clock)
    rec = Reconciler(store, {"fake": fake}, clock=clock, observe_wait_s=0.2)
    noticed = jobs.submit(store, parse_spec({**SPEC, "name": "noticed"}), clock.now())
    hung = jobs.submit(store, parse_spec({**SPEC, "name": "hung"}), clock.now())
    for _ in range(5):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        [a1], [h1] = jobs.attempts_of(s, noticed.id), jobs.attempts_of(s, hung.id)
    assert a1.status == h1.status == AttemptStatus.RUNNING
    fake.hang_instance = h1.instance_id
    try:
        fake.inject_preemption(a1.instance_id, notice_s=30)
        clock.advance(2)
        started = time.monotonic()
        rec.run_pass()  # the hung host's read starts and does not return; the notice is handled
        took = time.monotonic() - started
        assert fake.entered.is_set() and took < 30  # not the read's 120 s
        with store.read() as s:
            a1, a2 = jobs.attempts_of(s, noticed.id)
            [h1] = jobs.attempts_of(s, hung.id)
        assert a1.status == AttemptStatus.DRAINING and a2.status == AttemptStatus.LAUNCHED
        assert h1.status == AttemptStatus.RUNNING  # left alone, not declared lost
        clock.advance(2)
        rec.run_pass()  # still out: no second read of that host piles up
        assert fake.calls.count(("terminate", h1.instance_id)) == 0
    finally:
        fake.release.set()
    deadline = time.monotonic() + 30
    while rec.reads.pending_jobs() and time.monotonic() < deadline:  # the test waits, not the reconciler
        time.sleep(0.01)
    clock.advance(2)
    rec.run_pass()  # the read is in: the job is observed again
    with store.read() as s:
        [h1] = jobs.attempts_of(s, hung.id)
    assert h1.status == AttemptStatus.RUNNING and h1.instance_id == fake.hang_instance


class LaunchEndsAfterListing(HangingLaunch):
    """The hung launch is let go right after a listing, and that listing waits until it is over:
    the launch's instance exists, its attempt row says launched, and the listing predates both."""

    def __init__(self, clock, pool_of) -> None:  # type: ignore[no-untyped-def]
        super().__init__(clock)
        self.pool_of, self.let_go_after_listing = pool_of, False

    def list_managed(self) -> list[Instance]:
        listed = super().list_managed()
        if self.let_go_after_listing:
            self.let_go_after_listing = False
            self.release.set()
            deadline = time.monotonic() + 30
            while self.pool_of().busy(self.hang_job) and time.monotonic() < deadline:  # the test waits
                time.sleep(0.01)
        return listed


def test_a_launch_that_ends_after_the_listing_is_not_taken_for_a_vanished_instance(store, clock):
    rec: Reconciler | None = None
    fake = LaunchEndsAfterListing(clock, lambda: rec.pool)  # type: ignore[union-attr]
    rec = Reconciler(store, {"fake": fake}, clock=clock, launch_wait_s=0.2)
    job = jobs.submit(store, parse_spec({**SPEC, "name": "slow"}), clock.now())
    fake.hang_job = job.id
    try:
        rec.run_pass()  # its launch starts and goes on in the background
        assert fake.entered.is_set() and rec.pool.busy(job.id)
        fake.let_go_after_listing = True
        clock.advance(2)
        rec.run_pass()  # the launch ends between this pass's listing and the job's turn
        assert not rec.pool.busy(job.id)
        clock.advance(2)
        rec.run_pass()  # a listing that postdates the launch
    finally:
        fake.release.set()
    with store.read() as s:
        attempts = jobs.attempts_of(s, job.id)
    assert [(a.number, a.status) for a in attempts] in ([(1, AttemptStatus.LAUNCHED)], [(1, AttemptStatus.RUNNING)])
