"""Issue 16, item 1 (second half) and build item 2: a stored job the daemon cannot load is marked
failed once, with a one-line reason, and is not retried every pass; doctor lists it.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import logging

from sqlmodel import col, select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.service import JobService
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Event, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider


def poison(store, job_id: int, text: str) -> None:
    """A row as an older gpuorch (or a hand edit) left it: a spec this daemon cannot load."""
    with store.write() as s:
        s.get(Job, job_id).spec = text


def test_an_unreadable_job_is_failed_once_with_a_reason(store, clock, caplog, tmp_path):
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    bad = jobs.submit(store, parse_spec({"name": "bad", "run": "x"}), clock.now())
    good = jobs.submit(store, parse_spec({"name": "good", "run": "x", "resources": {"gpu": "A100:80GB:1"}}),
                       clock.now())
    poison(store, bad.id, '{"name": "bad", "run": "x", "resources": {"cpus": null}}')
    with caplog.at_level(logging.ERROR):
        for _ in range(20):
            rec.run_pass()
            clock.advance(5)
    with store.read() as s:
        row = s.get(Job, bad.id)
        kinds = [e.kind for e in s.exec(select(Event).where(Event.job_id == bad.id).order_by(col(Event.id)))]
        other = s.get(Job, good.id)
    assert row.status == JobStatus.FAILED and row.finished_at is not None
    assert "resources.cpus" in row.message and "\n" not in row.message
    assert kinds.count("quarantined") == 1
    assert not [r for r in caplog.records if r.exc_info]  # no traceback per pass
    assert other.status != JobStatus.QUEUED  # the others are not held up
    summary = JobService(store, tmp_path).job(str(bad.id))
    assert summary["status"] == "failed" and "cannot be read" in summary["message"]


def test_doctor_lists_quarantined_jobs(store, clock):
    from gpuorch.doctor.state import quarantined_findings

    rec = Reconciler(store, {"fake": FakeProvider(clock)}, clock=clock)
    bad = jobs.submit(store, parse_spec({"name": "bad", "run": "x"}), clock.now())
    poison(store, bad.id, "not json")
    rec.run_pass()
    found = quarantined_findings(store.url)
    assert len(found) == 1 and str(bad.id) in found[0].message and "gpuorch" in found[0].fix
