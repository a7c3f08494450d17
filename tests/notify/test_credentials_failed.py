"""``provider.credentials_failed`` outside a launch, through the assembled daemon: a provider
refusing the daemon's credentials (``AuthError``) while its instances or offers are listed, a
runner is started or its catalog is refreshed is told once per provider an hour
(``reconciler.observe.credentials``), its event and outbox row in one transaction, however many
passes fail on it, and a restarted daemon does not tell it again within the hour.

(The launch's own refusal: ``test_money_events.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from gpuorch.errors import AuthError
from gpuorch.notify.sender import from_config
from gpuorch.ops.catalog_refresh import CatalogRefresher
from gpuorch.store.models import Event, Notification
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.notify, pytest.mark.timeout(300)]
JOB = {"resources": {"gpu": "T4:1"}, "spot_policy": "on-demand", "run": "true"}
KEY_REFUSED = "the API key was refused (HTTP 401); check providers.local's key"


def _refused(*_: object) -> Any:
    raise AuthError(KEY_REFUSED, code="Unauthorized")


def _config(tmp_path, receiver, secret) -> dict[str, Any]:
    key = tmp_path / "webhook.key"
    key.write_text(secret)
    return {"notifications": {"webhooks": [{"url": receiver.url, "secret_file": str(key),
                                            "events": ["provider.credentials_failed"]}]}}


def _told(d: AssembledDaemon) -> tuple[list[Event], list[Notification]]:
    with d.store.read() as s:
        return (list(s.exec(select(Event).where(Event.kind == "credentials_failed"))),
                list(s.exec(select(Notification).where(Notification.type == "provider.credentials_failed"))))


def test_listing_instances_refused_is_told_once_across_passes_and_a_restart(tmp_path, receiver, secret):
    home, config = tmp_path / "home", _config(tmp_path, receiver, secret)
    with AssembledDaemon.start(home, config) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        d.adapter("local").list_managed = _refused
        d.until(lambda: (d.run_pass(), sender.tick(), receiver.ok())[2], what="the credentials notification")
        for _ in range(3):  # every pass still fails on the key: nothing more is recorded
            d.run_pass()
            sender.tick()
        [event], [row] = _told(d)
    [got] = receiver.ok()
    doc = got.verified
    assert doc["id"] == row.uid and doc["type"] == "provider.credentials_failed"
    assert doc["data"]["event"] == {"provider": "local", "doing": "listing instances"}
    assert doc["data"]["message"] == f"local: listing instances refused: {KEY_REFUSED}"
    assert event.ts == row.ts  # one transaction wrote both
    with AssembledDaemon.start(home, config) as d:  # within the hour: the store's event is found, not told again
        d.adapter("local").list_managed = _refused
        for _ in range(2):
            d.run_pass()
        events, rows = _told(d)
    assert len(events) == 1 and len(rows) == 1


def test_offers_and_a_catalog_refresh_refused_are_one_event_a_provider(tmp_path, receiver, secret):
    """The offers' listing and the scheduled catalog refresh (its own thread in the daemon) share
    the pass's alarm: the provider is told once, by whichever refusal came first."""
    with AssembledDaemon.start(tmp_path / "home", _config(tmp_path, receiver, secret)) as d:
        local = d.adapter("local")
        local.offers = _refused
        d.rec.invalidate_offers()
        d.run_pass()
        [event], [_] = _told(d)
        assert event.message == f"local: listing offers refused: {KEY_REFUSED}"
        local.refresh_offers = _refused  # what a GCP or Azure adapter's refresh raises for a refused key
        refresher = CatalogRefresher({"local": local}, d.config.home, 3600.0, d.rec.clock.now, d.rec.offers.alarm)
        assert refresher.run_due() == [] and KEY_REFUSED in refresher.errors["local"]
        assert len(_told(d)[0]) == 1  # the same provider within the hour
        other = CatalogRefresher({"gcp": local}, d.config.home, 3600.0, d.rec.clock.now, d.rec.offers.alarm)
        other.run_due()
        events, rows = _told(d)
    assert [e.message for e in events][1:] == [f"gcp: refreshing the catalog refused: {KEY_REFUSED}"]
    assert len(rows) == 2


class _RefusingRunner:
    """The local runner, whose ``start`` raises what a runner raises for refused credentials."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def start(self, *_: object) -> None:
        raise AuthError(KEY_REFUSED, code="Unauthorized")


def test_a_runner_refused_is_told_once_and_the_attempt_waits(tmp_path, receiver, secret):
    with AssembledDaemon.start(tmp_path / "home", _config(tmp_path, receiver, secret)) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        local = d.adapter("local")
        runner = local.runner
        local.runner = lambda inst: _RefusingRunner(runner(inst))
        job = d.submit({"name": "refused", **JOB})
        d.until(lambda: (d.run_pass(), sender.tick(), receiver.ok())[2], what="the credentials notification")
        for _ in range(3):
            d.run_pass()
            sender.tick()
        [event], [_] = _told(d)
        assert event.message == f"local: starting the agent refused: {KEY_REFUSED}"
        assert len(receiver.ok()) == 1
        assert d.status(job) not in ("failed", "cancelled")  # a person can mend the key before the boot timeout
        local.runner = runner
        assert d.until_terminal(job).status == "succeeded"


class _StatusRefused(_RefusingRunner):
    """A runner whose agent started, and whose status reads now raise what a runner raises for
    refused credentials (an SSH key taken away, an exec the cluster now forbids)."""

    def start(self, *args: object) -> None:
        self._inner.start(*args)

    def status(self) -> None:
        raise AuthError(KEY_REFUSED, code="Unauthorized")


def test_an_agent_status_read_refused_is_told_once_and_the_job_goes_on(tmp_path, receiver, secret):
    """The pass's status reads (``observe.status_reads``, inline here; a batched provider's
    ``agent_statuses`` and the off-pass pool share it): told like any refusal, once an hour."""
    gate = tmp_path / "gate"
    with AssembledDaemon.start(tmp_path / "home", _config(tmp_path, receiver, secret)) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        local = d.adapter("local")
        runner = local.runner
        job = d.submit({"name": "read", **JOB, "run": f"while [ ! -e {gate} ]; do sleep 0.1; done"})
        d.until(lambda: d.status(job) == "running", what="the job to run")
        local.runner = lambda inst: _StatusRefused(runner(inst))
        d.until(lambda: (d.run_pass(), sender.tick(), receiver.ok())[2], what="the credentials notification")
        for _ in range(3):
            d.run_pass()
            sender.tick()
        [event], [_] = _told(d)
        assert event.message == f"local: reading the agent's status refused: {KEY_REFUSED}"
        assert len(receiver.ok()) == 1 and not d.job(job).status.terminal  # the attempt goes on, unread
        local.runner = runner
        gate.touch()
        assert d.until_terminal(job).status == "succeeded"


def test_a_batched_status_read_refused_is_told(tmp_path):
    """A provider that reads its agents in one call (``agent_statuses``: the sim cloud) and
    refuses the credentials there is told too."""
    from gpuorch.testing.e2e import events

    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "aa-1a_t4.json").write_text('{"metadata": {"gap_seconds": 60}, "data": [1, 1, 1, 1]}')
    sim = {"traces": str(traces), "boot_s": 0, "time_scale": 1, "instance_type": "t4-sim", "gpu": "T4",
           "gpu_memory_gib": 16, "on_demand_price": 0.5, "min_billing_s": 0}
    gate = tmp_path / "gate"
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"sim": sim}}) as d:
        job = d.submit({"name": "batched", **JOB, "providers": ["sim"],
                        "run": f"while [ ! -e {gate} ]; do sleep 0.1; done"})
        d.until(lambda: d.status(job) == "running", what="the job to run on the sim cloud")
        sim_adapter = d.adapter("sim")
        batched = sim_adapter.agent_statuses
        sim_adapter.agent_statuses = _refused
        d.until(lambda: events(d.store, "credentials_failed"), what="the credentials event")
        [event] = events(d.store, "credentials_failed")
        assert event.message == f"sim: reading the agent's status refused: {KEY_REFUSED}"
        sim_adapter.agent_statuses = batched
        gate.touch()
        assert d.until_terminal(job).status == "succeeded"
