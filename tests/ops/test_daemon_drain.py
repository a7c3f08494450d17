"""Shutdown: SIGTERM drains and releases leases, jobs keep running, the next daemon adopts them.

Bare Reconciler: the Daemon's own shutdown is under test, serving a reconciler whose provider the
test holds.
"""

from __future__ import annotations

import threading

import pytest
from daemon_proc import DaemonProcess, wait_until
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.daemon import Daemon
from gpuorch.reconciler import Reconciler
from gpuorch.store import Store
from gpuorch.store.models import Event, JobStatus
from gpuorch.testing.e2e import attempts, job_row
from gpuorch.testing.fake_provider import FakeProvider
from gpuorch_local.provider import LocalProvider


def job_spec(tmp_path, release):
    return parse_spec({
        "name": "sleeper", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
        "run": f"while [ ! -e {release} ]; do sleep 0.1; done; echo released",
        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"},
    })


def test_sigterm_releases_leases_and_a_restarted_daemon_adopts_the_running_job(tmp_path, _isolated_home):
    home, release = _isolated_home, tmp_path / "release"
    store = Store(f"sqlite:///{home / 'state.db'}")
    local = LocalProvider(home / "local")
    first = DaemonProcess(home, "first")
    second = None
    try:
        assert first.ready()["READY"] == "1"
        job = jobs.submit(store, job_spec(tmp_path, release), utcnow())
        wait_until(lambda: job_row(store, job.id).status == JobStatus.RUNNING, what="the job to run")
        owner = job_row(store, job.id).lease_owner
        assert owner is not None
        (attempt,) = before = attempts(store, job.id)

        assert first.terminate() == 0
        assert "STOPPING" in first.notify.wait_for("STOPPING")
        after = job_row(store, job.id)
        assert (after.lease_owner, after.lease_expires, after.status) == (None, None, JobStatus.RUNNING)
        inst = local.get(attempt.instance_id)
        assert inst.state.alive and local.runner(inst).status().state == "running"  # the job did not stop

        second = DaemonProcess(home, "second")
        second.ready()
        second.passes(2)
        adopted = job_row(store, job.id)
        assert adopted.lease_owner not in (None, owner) and adopted.status == JobStatus.RUNNING
        assert [a.instance_id for a in attempts(store, job.id)] == [a.instance_id for a in before]
        assert [i.id for i in local.list_managed() if i.state.alive] == [attempt.instance_id]

        release.touch()
        wait_until(lambda: job_row(store, job.id).status.terminal, what="the job to end")
        assert job_row(store, job.id).status == JobStatus.SUCCEEDED
        assert len(attempts(store, job.id)) == 1
        with store.read() as s:
            launches = s.exec(select(Event).where(Event.job_id == job.id, Event.kind == "launch_requested")).all()
        assert len(launches) == 1
        assert second.terminate() == 0
        messages = [m["message"] for m in first.log()]
        assert "leases released; running jobs are left to the next daemon" in messages
    finally:
        first.close()
        if second is not None:
            second.close()
        for i in local.list_managed():
            local.terminate(i.id)
        store.close()


SPEC = {"name": "t", "run": "x", "resources": {"gpu": "A100:80GB:1"}}


class BlockingFake(FakeProvider):
    """A provider whose listing hangs until released: a pass stuck in a cloud call."""

    def __init__(self) -> None:
        super().__init__()
        self.block, self.entered, self.release = False, threading.Event(), threading.Event()

    def list_managed(self):  # type: ignore[no-untyped-def]
        if self.block:
            self.entered.set()
            self.release.wait(120)
        return super().list_managed()


def test_a_pass_stuck_past_the_drain_timeout_is_left_and_leases_are_released(store):
    fake = BlockingFake()
    rec = Reconciler(store, {"fake": fake})
    job = jobs.submit(store, parse_spec(SPEC), utcnow())
    rec.run_pass()
    assert job_row(store, job.id).lease_owner == rec.owner
    fake.block = True
    daemon = Daemon(rec, DaemonConfig(drain_timeout_s=0.2))
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        assert fake.entered.wait(60)
        daemon.request_stop()
        serving.join(60)
        assert not serving.is_alive() and not fake.release.is_set()  # returned while the pass still hangs
        assert job_row(Store(store.url), job.id).lease_owner is None
    finally:
        fake.release.set()


def test_once_stopping_a_pass_claims_nothing_more_and_launches_no_job_twice(store):
    stop = threading.Event()

    class StopsOnLaunch(FakeProvider):
        def launch(self, request):  # type: ignore[no-untyped-def]
            stop.set()  # SIGTERM arrives while the first job is being launched
            return super().launch(request)

    rec = Reconciler(store, {"fake": StopsOnLaunch()})
    first, second = (jobs.submit(store, parse_spec({**SPEC, "name": n}), utcnow()) for n in ("a", "b"))
    rec.run_pass(stop=stop)
    # Both were decided before the first cloud call, so their intents went into one launch batch
    # (apply.py): the second is launched or left REQUESTED for the next daemon; never twice.
    assert len(attempts(store, first.id)) == 1 and len(attempts(store, second.id)) <= 1
    rec.release_leases()
    assert job_row(store, first.id).lease_owner is None and job_row(store, second.id).lease_owner is None
    assert rec.run_pass(stop=stop) == 0.0 and job_row(store, second.id).lease_owner is None  # nothing claimed


@pytest.mark.parametrize("sig", ["SIGINT"])
def test_sigint_drains_like_sigterm(tmp_path, _isolated_home, sig):
    import signal

    d = DaemonProcess(_isolated_home)
    try:
        d.ready()
        d.passes(1)
        d.proc.send_signal(getattr(signal, sig))
        assert d.proc.wait(60) == 0
        assert "STOPPING" in d.notify.wait_for("STOPPING")
    finally:
        d.close()
