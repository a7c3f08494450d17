"""An idle warm instance gives way to other jobs' launches in the caps (issue 35): it reserves
nothing ahead of them, so the warm sweep must release it in the very pass that launched them,
when they no longer leave its own horizon room; it reads the caps as the pass's launches left
them, not as the pass's first gate read them.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make the spend exact to the cent the daily cap is then lowered to (the caps' policy,
``Money.policy``, replaced in place).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import select

from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Policy
from gpuorch.placement import candidates
from gpuorch.reconciler import Reconciler
from gpuorch.reconciler.observe.views import JobView
from gpuorch.store.models import Job, WarmInstance
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, WarmCapableProvider, default_offers

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
A100 = {"run": "true", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "keep_warm": "10m"}
T4 = {"run": "true", "resources": {"gpu": "T4:1"}, "spot_policy": "on-demand"}  # never fits the A100 instance


def submit(store, clock: FakeClock, name: str, spec: dict, later: bool) -> Job:
    job = jobs.submit(store, parse_spec({"name": name, **spec}), clock.now())
    if later:
        hold(store, job.id, clock.now() + timedelta(hours=1))
    return job


def hold(store, job_id: int | None, until: datetime | None) -> None:
    with store.write() as s:
        row = s.get(Job, job_id)
        assert row is not None
        row.not_before, row.lease_owner, row.lease_expires = until, None, None


def warm_rows(store) -> list[WarmInstance]:
    with store.read() as s:
        return list(s.exec(select(WarmInstance)))


def test_the_warm_sweep_releases_an_idle_instance_in_the_pass_whose_launches_leave_it_no_room(store):
    clock = FakeClock(T0)
    fake = WarmCapableProvider(clock, offers=default_offers(), boot_s=10, script=FakeJobScript(duration_s=60))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(daily_cap=50.0))
    first = submit(store, clock, "a", A100, later=False)
    submit(store, clock, "b", A100, later=True)  # fits the instance: keeps it warm (it is wanted)
    third = submit(store, clock, "c", T4, later=True)
    fourth = submit(store, clock, "d", T4, later=True)  # decided after c: its gate reads the caps before c's launch
    for _ in range(60):
        rec.run_pass()
        if [w.status for w in warm_rows(store)] == ["idle"]:
            break
        clock.advance(5)
    assert [w.status for w in warm_rows(store)] == ["idle"] and warm_rows(store)[0].job_id == first.id
    rec.run_pass()
    assert [w.status for w in warm_rows(store)] == ["idle"]  # wanted by b: kept
    # The daily cap: the spend, the idle instance's own horizon, and half of one T4 launch's reservation.
    spec = parse_spec({"name": "c", **T4})
    gate = rec.money.gate(JobView(third, spec, ()), clock.now())
    assert gate is not None
    spent, need = gate.caps[0].spent, gate.need(candidates(spec, [o for o in default_offers() if o.gpu == "T4"])[0])
    idle_h = warm_rows(store)[0].price_per_hour * Policy().for_attempt(0.0).horizon_s / 3600  # an idle one: S = I
    cap = spent + idle_h + need / 2  # c's launch fits beside the idle spend; the idle horizon then does not
    rec.money.policy = Policy(daily_cap=cap)
    hold(store, third.id, None)
    hold(store, fourth.id, None)
    rec.run_pass()
    assert attempts(store, third.id or 0)  # launched: the idle instance reserved nothing ahead of it
    [w] = warm_rows(store)
    assert w.status == "released" and w.reason is not None, (w.status, w.reason)  # in the same pass
    assert w.reason.startswith("released before its idle time would cross a cap"), w.reason
