"""``cap.warning`` and ``provider.credentials_failed`` through the assembled daemon.

``cap.warning``: a cap 80 % spent is told once, with its event and
its outbox row written together, and a restarted daemon does not tell it again.

The daily cap is the cheapest to cross in a test: a first daemon (no cap) runs a one-second job,
billed its local market's 60-second minimum; a second daemon on the same store, with a daily cap
the job's cost is 85 % of, sees the day's spend when it gates the next job (which the cap then
holds: its worst case no longer fits), and tells it to a real receiver."""

from __future__ import annotations

import pytest
from sqlmodel import select

from gpuorch.money.cost import attempt_cost
from gpuorch.notify.sender import from_config
from gpuorch.store.models import Event, Notification
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.notify, pytest.mark.timeout(300)]
JOB = {"resources": {"gpu": "T4:1"}, "spot_policy": "on-demand", "run": "true"}


def _warnings(d: AssembledDaemon) -> tuple[list[Event], list[Notification]]:
    with d.store.read() as s:
        return (list(s.exec(select(Event).where(Event.kind == "cap_warning"))),
                list(s.exec(select(Notification).where(Notification.type == "cap.warning"))))


def test_a_daily_cap_80_percent_spent_is_told_once_across_a_restart(tmp_path, receiver, secret):
    home = tmp_path / "home"
    with AssembledDaemon.start(home) as d:
        first = d.submit({"name": "first", **JOB})
        d.until_terminal(first)
        [a] = d.attempts(first)
        spent = attempt_cost(a, d.rec.clock.now())
    assert spent > 0
    key = tmp_path / "webhook.key"
    key.write_text(secret)
    config = {"daily_budget": round(spent / 0.85, 9), "budget_stop_grace_s": 1,
              "notifications": {"webhooks": [{"url": receiver.url, "secret_file": str(key),
                                              "events": ["cap.warning"]}]}}
    with AssembledDaemon.start(home, config) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        d.submit({"name": "second", **JOB})
        d.until(lambda: (sender.tick(), receiver.ok())[1], what="the cap warning")
        for _ in range(3):
            d.run_pass()
            sender.tick()
        [event], [row] = _warnings(d)
    [got] = receiver.ok()
    doc = got.verified
    assert doc["type"] == "cap.warning" and doc["id"] == row.uid
    assert doc["data"]["event"]["scope"] == "daily" and doc["data"]["event"]["share"] >= 0.8
    assert "daily cap" in doc["data"]["message"] and "(85%)" in doc["data"]["message"]
    assert doc["chat"]["title"] == "gpuorch: the daily cap is 80 % spent"
    assert event.ts == row.ts  # one transaction wrote both
    with AssembledDaemon.start(home, config) as d:  # a restarted daemon: the same crossing, not told again
        for _ in range(3):
            d.run_pass()
        assert [len(x) for x in _warnings(d)] == [1, 1]


def test_a_sweep_cap_is_told_once_per_crossing_and_again_after_a_raise(store, clock):
    """``CapWatch`` alone, on gates built by hand (a unit below the daemon): a sweep's cap 80 % spent
    is told once, by this daemon or a restarted one; raised to $2, its spend crossing $1.60 is told
    again, naming the sweep."""
    from gpuorch.jobs import intent
    from gpuorch.jobs.spec import parse_spec
    from gpuorch.money.caps import Cap, Gate, Policy, Totals
    from gpuorch.reconciler.apply.capwatch import CapWatch
    from gpuorch.store.models import Job, Sweep

    with store.write() as s:
        sweep = Sweep(name="lr", spec="{}", max_cost=1.0, created_at=clock.now())
        s.add(sweep)
        s.flush()
        sweep_id = sweep.id
    job = intent.submit(store, parse_spec({"name": "lr-0", **JOB}), clock.now())
    with store.write() as s:
        s.get(Job, job.id).sweep_id = sweep_id
    with store.read() as s:
        row = s.get(Job, job.id)

    def gate(limit: float, spent: float) -> Gate:
        return Gate(clock.now(), Policy(), (Cap("sweep lr budget", limit, Totals(spent=spent), row.id),))

    def told() -> list[Notification]:
        with store.read() as s:
            return list(s.exec(select(Notification).where(Notification.type == "cap.warning")))

    CapWatch(store).check(row, gate(1.0, 0.79))
    assert told() == []
    watch = CapWatch(store)
    for _ in range(2):
        watch.check(row, gate(1.0, 0.8))
    CapWatch(store).check(row, gate(1.0, 0.95))  # a restart: the same crossing
    assert len(told()) == 1
    CapWatch(store).check(row, gate(2.0, 1.0))  # raised: 50 %
    assert len(told()) == 1
    CapWatch(store).check(row, gate(2.0, 1.7))
    [first, second] = told()
    assert second.job_id is None and f'"sweep_id": {sweep_id}' in (second.data or "")
    assert second.message == "sweep lr has spent $1.70 of its $2.00 cap (85%)"
    alone = intent.submit(store, parse_spec({"name": "solo", **JOB, "budget": {"max_cost": 1.0}}), clock.now())
    with store.read() as s:
        solo = s.get(Job, alone.id)
    CapWatch(store).check(solo, Gate(clock.now(), Policy(), (Cap("job budget", 1.0, Totals(spent=0.9), solo.id),)))
    third = told()[-1]
    assert third.job_id == solo.id and third.message == f"job solo ({solo.id}) has spent $0.90 of its $1.00 cap (90%)"


def test_a_provider_refusing_the_credentials_is_told_once(tmp_path, receiver, secret):
    """The local adapter's launch made to raise what a cloud adapter raises for a refused key
    (``AuthError``): the attempt ends, the provider is backed off, and one
    ``provider.credentials_failed`` reaches the receiver, however many jobs it stopped."""
    from gpuorch.errors import AuthError

    key = tmp_path / "webhook.key"
    key.write_text(secret)
    config = {"notifications": {"webhooks": [{"url": receiver.url, "secret_file": str(key),
                                              "events": ["provider.credentials_failed"]}]}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)

        def refused(request):
            raise AuthError("the API key was refused (HTTP 401); check providers.local's key", code="Unauthorized")

        d.adapter("local").launch = refused
        jobs = [d.submit({"name": f"job-{i}", **JOB}) for i in range(3)]
        d.until(lambda: all(d.attempts(j) for j in jobs) and (sender.tick(), receiver.ok())[1],
                what="the credentials notification")
        for _ in range(3):
            d.run_pass()
            sender.tick()
        with d.store.read() as s:
            told = list(s.exec(select(Event).where(Event.kind == "credentials_failed")))
    assert told and all("API key was refused" in e.message for e in told)
    [got] = receiver.ok()
    doc = got.verified
    assert doc["type"] == "provider.credentials_failed" and doc["data"]["event"]["provider"] == "local"
    assert "local: launch refused: the API key was refused" in doc["data"]["message"]
    assert doc["chat"]["title"] == "gpuorch: local refused the daemon's credentials"
