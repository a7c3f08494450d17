"""A batch's intents (``Launching.intents``): the attempt rows, events and job statuses of jobs no
cap applies to are written with Core, one ``INSERT`` for the batch, and are the rows the
one-job path (``Launching.intent``, the ORM) writes; a job under a budget in the same batch is
admitted as before, after the rows before it are written. Real SQLite, FakeProvider, fake clock.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlmodel import col, select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.placement.rank import Candidate
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.apply.launching import Intended
from gpuorch.reconciler.decide.actions import Launch
from gpuorch.reconciler.observe.views import JobView
from gpuorch.store.models import Attempt, AttemptStatus, Event, Job, JobStatus
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider

SPEC = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "1h"}}


def setup(store, clock, specs: list[dict[str, Any]]) -> tuple[Reconciler, list[tuple[JobView, Launch]]]:  # type: ignore[no-untyped-def]
    """Submit one job per spec, claim them all, and make each a launch on the fake's first A100
    offer (spot), as the pass hands them to ``intents``."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i, extra in enumerate(specs):
        jobs.submit(store, parse_spec({**SPEC, "name": f"j{i}", **extra}), clock.now())
    claimed = rec.leases.claim(clock.now())
    offer = next(o for o in fake.offers() if o.gpu == "A100-80GB" and o.spot_price_per_hour is not None)
    cand = Candidate(offer=offer, spot=True, est_hours=1.0, est_cost=1.0)
    batch = [(JobView(job=j, spec=parse_spec({**SPEC, "name": f"j{i}", **extra}), attempts=[]), Launch((cand,)))
             for i, (j, extra) in enumerate(zip(sorted(claimed, key=lambda j: j.id or 0), specs, strict=True))]
    return rec, batch


@contextmanager
def orm_objects() -> Iterator[list[str]]:
    made: list[str] = []

    def attempt(target, args, kwargs):  # type: ignore[no-untyped-def]
        made.append("attempt")

    def ev(target, args, kwargs):  # type: ignore[no-untyped-def]
        made.append("event")

    event.listen(Attempt, "init", attempt)
    event.listen(Event, "init", ev)
    try:
        yield made
    finally:
        event.remove(Attempt, "init", attempt)
        event.remove(Event, "init", ev)


def columns(row: Attempt) -> dict[str, Any]:
    return {k: v for k, v in row.model_dump().items() if k not in ("id", "job_id")}


def test_an_ungated_batch_writes_the_rows_the_one_job_path_writes_without_orm_objects(store, clock):
    rec, batch = setup(store, clock, [{}, {}, {}])
    launching, now = rec.applier.launching, clock.now()
    (v0, a0) = batch[0]
    one = launching.intent(v0, a0, 0, now)  # the one-job path: ORM rows
    with orm_objects() as made:
        out = launching.intents(batch[1:], now)
    assert made == []  # was: an Attempt and an Event object a job
    assert [type(first[1]) for _, _, first in out] == [Intended, Intended]
    with store.read() as s:
        rows = {r.job_id: r for r in s.exec(select(Attempt))}
        evs = {e.job_id: e for e in s.exec(select(Event).where(Event.kind == "launch_requested"))}
        status = {j.id: j.status for j in s.exec(select(Job))}
    assert one[1] is not None and len(rows) == 3
    for view, _, (k, row, refused) in out:
        assert k == 0 and refused is None and row is not None
        stored = rows[view.job.id or 0]
        assert (row.id, row.job_id, row.number) == (stored.id, stored.job_id, 1)  # the row handed on is the stored one
        assert columns(stored) == columns(rows[v0.job.id or 0])  # every column as the ORM path writes it
        assert stored.status == AttemptStatus.REQUESTED and stored.offer is not None
        e, e0 = evs[view.job.id], evs[v0.job.id]
        assert (e.attempt, e.message, e.ts, e.data) == (e0.attempt, e0.message, e0.ts, e0.data)
    assert set(status.values()) == {JobStatus.STARTING}


def test_a_job_under_a_budget_in_the_batch_is_admitted_as_before_and_each_job_gets_its_own_row(store, clock):
    """Between ungated jobs, one whose budget admits the launch and one whose budget cannot:
    each First names its own job's row, the refused one none (and says why)."""
    rec, batch = setup(store, clock, [{}, {"budget": {"max_cost": 1000}}, {}, {"budget": {"max_cost": 0.0001}}, {}])
    out = rec.applier.launching.intents(batch, clock.now())
    assert [view.job.id for view, _, _ in out] == [view.job.id for view, _ in batch]
    with store.read() as s:
        rows = {r.job_id: r for r in s.exec(select(Attempt).order_by(col(Attempt.id)))}
    for i, (view, _, (_, row, refused)) in enumerate(out):
        if i == 3:
            assert row is None and refused is not None and view.job.id not in rows
            continue
        assert row is not None and refused is None and rows[view.job.id or 0].id == row.id
        assert isinstance(row, Attempt) == (i == 1)  # the budgeted job: the ORM path, with its admission
    assert sorted(rows) == sorted(view.job.id or 0 for i, (view, _) in enumerate(batch) if i != 3)


def test_a_pass_launches_every_job_of_an_ungated_batch_once(store, clock):
    """The whole path: a pass's batch of intents (Core), the launches from the rows handed on,
    and their records."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=600))
    rec = Reconciler(store, {"fake": fake}, clock=clock)
    for i in range(12):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())
    rec.run_pass()
    with store.read() as s:
        rows = list(s.exec(select(Attempt)))
        kinds = sorted(e.kind for e in s.exec(select(Event).where(col(Event.attempt).is_not(None))))
    assert len(rows) == 12 and {r.status for r in rows} == {AttemptStatus.LAUNCHED}
    assert {r.launched_at for r in rows} == {clock.now()}  # the fake's launch time: the pass's (its clock stood still)
    assert fake.count("launch") == 12 and len({r.instance_id for r in rows}) == 12
    assert kinds == ["launch_requested"] * 12 + ["launched"] * 12


class Died(BaseException):
    """The daemon's death at a crash point (not an error the pass would catch)."""


def test_a_daemon_that_dies_after_the_batchs_intents_is_followed_by_one_launch_a_job(store, clock, monkeypatch):
    """Killed right after the Core rows commit (no cloud call yet): the next life relaunches each
    job from its row (its stored offer, its client token), once."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=3600, checkpoint_every_s=600))
    for i in range(6):
        jobs.submit(store, parse_spec({**SPEC, "name": f"q{i}"}), clock.now())

    def crashpoint(name: str) -> None:
        if name == "launch.intent":
            raise Died(name)

    monkeypatch.setattr("gpuorch.reconciler.apply.launching.crashpoint", crashpoint)
    first = Reconciler(store, {"fake": fake}, clock=clock, owner="d1")
    try:
        first.run_pass()
        raise AssertionError("the pass did not reach its intents")
    except Died:
        pass
    first.pool.close()
    with store.read() as s:
        assert {r.status for r in s.exec(select(Attempt))} == {AttemptStatus.REQUESTED}
    assert fake.count("launch") == 0  # intent first: no cloud call before the rows commit
    monkeypatch.undo()
    clock.advance(120)  # d1's leases expire
    second = Reconciler(store, {"fake": fake}, clock=clock, owner="d2")
    for _ in range(4):
        second.run_pass()
        clock.advance(2)
    with store.read() as s:
        rows = list(s.exec(select(Attempt)))
    assert len(rows) == 6 and len({r.job_id for r in rows}) == 6 and {r.number for r in rows} == {1}  # one each
    assert {r.status for r in rows} <= {AttemptStatus.LAUNCHED, AttemptStatus.RUNNING}
    assert fake.count("launch") == 6 and len(fake.live_instances()) == 6  # one cloud call, one instance a job
